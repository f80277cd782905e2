"""``tasksieve benchmarks build`` and ``tasksieve dedup-index add``: persist the two indexes.

``benchmarks build`` writes one ``NAME.parquet`` per benchmark (texts, shingle hashes,
settings in the file metadata); pass the file or the directory as
``--benchmark`` later. ``dedup-index add`` appends tasks (candidate files or a curated run's
``tasks/`` shards) to a near-dedup index that ``curate --dedup-index DIR`` checks against;
``dedup-index compact`` merges its parts into one (``tasksieve.transforms.dedup.index_compact``).

With ``--format json`` each prints one JSON object on stdout: ``benchmarks build``
``{"output", "benchmarks": [{"benchmark", "items", "path"}]}``, ``dedup-index add``
``{"index", "added", "part"}``, ``dedup-index compact`` ``{"index", "merged", "rows",
"part"}``. Exit status 0 done, 2 usage or input error. The top level
imports the standard library only; the indexes come in when a command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tasksieve.pipeline.commands.decontaminate import add_decontam_flags, config_from
from tasksieve.pipeline.flags.shared import add_dedup_flags, add_format_flag, dedup_config


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("benchmarks", help="build persisted benchmark indexes")
    bsub = p.add_subparsers(dest="benchmarks_command", required=True, metavar="ACTION")
    b = bsub.add_parser("build", help="index benchmark sets for decontamination")
    b.add_argument(
        "--benchmark",
        "-b",
        action="append",
        required=True,
        help="humaneval or a JSONL/Parquet/datasets path (repeatable)",
    )
    b.add_argument("--name", help="benchmark name for a single path (default: file stem)")
    b.add_argument("--output", "-o", required=True, help="directory for NAME.parquet files")
    add_decontam_flags(b)
    add_format_flag(b, "what was written, on stdout: lines (text) or one JSON object (json)")

    d = sub.add_parser("dedup-index", help="maintain the near-dedup index of earlier runs")
    dsub = d.add_subparsers(dest="index_command", required=True, metavar="ACTION")
    a = dsub.add_parser("add", help="add tasks to the index")
    a.add_argument("--input", "-i", nargs="+", required=True, help="task files, dirs or globs")
    a.add_argument("--index", required=True, help="index directory (created if new)")
    add_dedup_flags(a)
    add_format_flag(a, "what was added, on stdout: a line (text) or one JSON object (json)")
    c = dsub.add_parser(
        "compact",
        help="merge the index's part files into one (curate and add do it past 32 parts)",
    )
    c.add_argument("--index", required=True, help="index directory")
    c.add_argument(
        "--min-parts",
        type=int,
        default=2,
        help="compact only when the index has at least this many parts (default 2)",
    )
    add_format_flag(c, "what was merged, on stdout: a line (text) or one JSON object (json)")


def run_build(args: argparse.Namespace) -> int:
    """Build and save one index file per benchmark."""
    from dataclasses import replace

    from tasksieve.transforms.decontam.sets import ContaminationIndex
    from tasksieve.transforms.decontam.stage import load_source

    text = args.format == "text"
    built: list[dict[str, Any]] = []
    try:
        cfg = config_from(args, args.benchmark)
        if args.name and len(args.benchmark) != 1:
            raise ValueError("--name applies to a single --benchmark")
        out = Path(args.output)
        for bench in args.benchmark:
            for items, _ in load_source(bench, cfg):
                if args.name:
                    items = [replace(it, benchmark=args.name) for it in items]
                if not items:
                    raise ValueError(f"benchmark {bench!r} has no items")
                index = ContaminationIndex(items, cfg.settings())
                path = out / f"{items[0].benchmark}.parquet"
                index.save(str(path))
                name = items[0].benchmark
                built.append({"benchmark": name, "items": len(items), "path": str(path)})
                if text:
                    print(f"{len(items)} items of {items[0].benchmark} -> {path}")
                if args.explain:
                    print(index.explain(), file=sys.stdout if text else sys.stderr)
    except (ValueError, ImportError, OSError) as exc:
        print(f"tasksieve benchmarks build: error: {exc}", file=sys.stderr)
        return 2
    if not text:
        print(json.dumps({"output": str(out), "benchmarks": built}))
    return 0


def run_index_add(args: argparse.Namespace) -> int:
    """Append the prompts of the given task files to the dedup index."""
    from dataclasses import replace

    from tasksieve.transforms.algorithms.minhash import MinHasher
    from tasksieve.transforms.dedup.index_compact import maybe_compact
    from tasksieve.transforms.dedup.index_store import write_index_part
    from tasksieve.transforms.ingest.files import InputError, expand_inputs
    from tasksieve.transforms.ingest.readers import iter_source_records

    try:
        cfg = replace(dedup_config(args), index_path=args.index)
        ids: list[str] = []
        sources: list[str] = []
        texts: list[str] = []
        for file in expand_inputs(args.input):
            for rec in iter_source_records(file):
                data = rec.data if isinstance(rec.data, dict) else {}
                if isinstance(data.get("prompt"), str) and "id" in data:
                    ids.append(str(data["id"]))
                    sources.append(f"{rec.source_file}:{rec.line}")
                    texts.append(data["prompt"])
        if not texts:
            raise ValueError("no records with id and prompt in the input")
        part = write_index_part(
            args.index,
            cfg.index_settings(),
            ids,
            sources,
            texts,
            MinHasher(cfg.num_perm, cfg.seed),
            cfg.shingle(),
        )
        maybe_compact(args.index)
    except (InputError, ValueError, OSError) as exc:
        print(f"tasksieve dedup-index add: error: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps({"index": args.index, "added": len(texts), "part": Path(part).name}))
    else:
        print(f"{len(texts)} tasks added to {args.index} ({Path(part).name})")
    return 0


def run_index_compact(args: argparse.Namespace) -> int:
    """Merge the parts of the dedup index into one."""
    from tasksieve.transforms.dedup.index_compact import compact_index

    try:
        merged, rows, part = compact_index(args.index, args.min_parts)
    except (ValueError, OSError) as exc:
        print(f"tasksieve dedup-index compact: error: {exc}", file=sys.stderr)
        return 2
    name = part.rsplit("/", 1)[-1]
    if args.format == "json":
        print(json.dumps({"index": args.index, "merged": merged, "rows": rows, "part": name}))
    elif merged:
        print(f"{merged} parts of {args.index} merged into {name} ({rows} tasks)")
    else:
        print(f"{args.index}: fewer than {max(2, args.min_parts)} parts, nothing to do")
    return 0


def run(args: argparse.Namespace) -> int:
    """Dispatch ``benchmarks`` and ``dedup-index`` actions."""
    if args.command == "benchmarks":
        return run_build(args)
    if args.index_command == "compact":
        return run_index_compact(args)
    return run_index_add(args)
