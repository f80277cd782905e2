"""``tasksieve decontaminate``: run decontamination alone and write clean tasks plus a report.

Output directory: ``clean.jsonl`` (the input records that matched no benchmark, as read),
``contamination.parquet`` (one row per task x benchmark item x method, DuckDB-readable),
``unreadable.jsonl`` (records that could not be parsed or lack the text field, with the
reason) and ``summary.json``. Every input record lands in exactly one of the three.

The top level imports the standard library only (the CLI builds its parser from here);
Beam and the index come in when the command runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasksieve.pipeline.flags.shared import add_format_flag

if TYPE_CHECKING:
    from tasksieve.transforms.decontam.stage import DecontamConfig

REPORT_COLUMNS = (
    "task_id",
    "source_file",
    "source_line",
    "benchmark",
    "item_id",
    "method",
    "score",
    "top",
)


def add_decontam_flags(p: argparse.ArgumentParser) -> None:
    """Flags shared by ``decontaminate`` and ``benchmarks build``."""
    p.add_argument("--benchmark-field", default="prompt", help="text field of benchmark sets")
    p.add_argument("--benchmark-id-field", default="", help="id field (default task_id/id)")
    p.add_argument(
        "--decontam-threshold",
        type=float,
        default=0.3,
        help="containment of a benchmark item's shingles in the task that counts as "
        "contaminated (default 0.3, with at least 10 shingles shared, or 30%% of a short "
        "item's and at least 4)",
    )
    p.add_argument("--ngram", type=int, default=13, help="word n-gram length (default 13)")
    p.add_argument(
        "--no-canonical-ids",
        action="store_true",
        help="compare identifiers as written (default: renamed names still match)",
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="print the near-dedup banding (curate) or the decontamination rules",
    )


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "decontaminate",
        help="check tasks against benchmark sets; write clean tasks and a report",
        description="Flag tasks matching benchmark items by substring, word n-grams and "
        "whole docstring sentences, containment of code shingles (as written and with the "
        "layout removed) and the item's own function names (see docs/decontamination.md).",
        epilog="output (--format json): one JSON object on stdout with keys output, clean, "
        "contaminated, unreadable, benchmarks, report (the keys of summary.json plus the "
        "output directory and the report path). exit status: 0 done (contaminated tasks are "
        "not an error), 2 usage or input error",
    )
    p.add_argument("--input", "-i", nargs="+", required=True, help="task files, dirs or globs")
    p.add_argument(
        "--benchmark",
        "-b",
        action="append",
        default=[],
        help="humaneval, a saved index, or a JSONL/Parquet/datasets path "
        "(repeatable; default humaneval)",
    )
    p.add_argument("--output", "-o", required=True, help="output directory")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output dir")
    p.add_argument("--text-field", default="prompt", help="text field of the tasks")
    p.add_argument("--id-field", default="id", help="id field of the tasks")
    add_decontam_flags(p)
    add_format_flag(p, "summary on stdout: one line (text) or one JSON object (json)")


def config_from(args: argparse.Namespace, benchmarks: list[str]) -> DecontamConfig:
    """DecontamConfig from parsed flags and a list of benchmark names or paths."""
    from tasksieve.transforms.decontam.stage import DecontamConfig

    extra = [b for b in benchmarks if b.lower() != "humaneval"]
    return DecontamConfig(
        humaneval=any(b.lower() == "humaneval" for b in benchmarks),
        benchmark_paths=tuple(extra),
        text_field=args.benchmark_field,
        id_field=args.benchmark_id_field,
        threshold=args.decontam_threshold,
        ngram=args.ngram,
        canonical_identifiers=not args.no_canonical_ids,
    )


@dataclass
class Counts:
    clean: int = 0
    contaminated: int = 0
    unreadable: int = 0


def _write_report(rows: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("task_id", pa.string()),
            ("source_file", pa.string()),
            ("source_line", pa.int64()),
            ("benchmark", pa.string()),
            ("item_id", pa.string()),
            ("method", pa.string()),
            ("score", pa.float64()),
            ("top", pa.bool_()),
        ]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="zstd")


def decontaminate_files(args: argparse.Namespace, cfg: DecontamConfig, out: Path) -> Counts:
    """Check every record of the inputs; write clean, unreadable and the report below ``out``."""
    import sys

    from tasksieve.transforms.decontam.stage import build_index
    from tasksieve.transforms.ingest.files import expand_inputs
    from tasksieve.transforms.ingest.readers import iter_source_records

    index = build_index(cfg)
    if args.explain:  # stdout is the JSON summary's under --format json
        to = sys.stderr if getattr(args, "format", "text") == "json" else sys.stdout
        print(index.explain(), file=to)
    counts = Counts()
    rows: list[dict[str, Any]] = []
    out.mkdir(parents=True)
    with (out / "clean.jsonl").open("w") as clean, (out / "unreadable.jsonl").open("w") as bad:
        for file in expand_inputs(args.input):
            for rec in iter_source_records(file):
                where = {"source_file": rec.source_file, "source_line": rec.line}
                text = rec.data.get(args.text_field) if isinstance(rec.data, dict) else None
                if not isinstance(text, str):
                    why = rec.error or f"field {args.text_field!r} missing or not a string"
                    bad.write(json.dumps({**where, "reason": why, "raw": rec.raw}) + "\n")
                    counts.unreadable += 1
                    continue
                assert isinstance(rec.data, dict)
                found = index.check(text)
                if not found:
                    clean.write(json.dumps(rec.data, ensure_ascii=False) + "\n")
                    counts.clean += 1
                    continue
                counts.contaminated += 1
                task_id = str(rec.data.get(args.id_field, ""))
                for k, f in enumerate(found):
                    rows.append(
                        {
                            "task_id": task_id,
                            **where,
                            "benchmark": f.source,
                            "item_id": f.other_id,
                            "method": f.method,
                            "score": f.score,
                            "top": k == 0,
                        }
                    )
    _write_report(rows, out / "contamination.parquet")
    return counts


def run(args: argparse.Namespace) -> int:
    """Entry point of ``tasksieve decontaminate``."""
    import sys

    from tasksieve.transforms.ingest.files import InputError

    out = Path(args.output)
    try:
        cfg = config_from(args, args.benchmark or ["humaneval"])
        if out.exists():
            if not args.overwrite:
                raise ValueError(f"{out} exists; pass --overwrite to replace it")
            shutil.rmtree(out)
        counts = decontaminate_files(args, cfg, out)
    except (InputError, ValueError, ImportError, OSError) as exc:
        print(f"tasksieve decontaminate: error: {exc}", file=sys.stderr)
        return 2
    summary = {
        "clean": counts.clean,
        "contaminated": counts.contaminated,
        "unreadable": counts.unreadable,
        "benchmarks": cfg.names(),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    if args.format == "json":
        report = str(out / "contamination.parquet")
        print(json.dumps({"output": str(out), **summary, "report": report}))
        return 0
    print(
        f"{counts.clean} clean, {counts.contaminated} contaminated, {counts.unreadable} "
        f"unreadable -> {out} (report: contamination.parquet)"
    )
    return 0
