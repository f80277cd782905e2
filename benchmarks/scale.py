"""Scale benchmark: the curate pipeline on a synthetic corpus, stage by stage, 10k to 100k tasks.

    PYTHONPATH=. .venv/bin/python -m benchmarks.scale --tasks 10000,30000,100000 \\
        --full-per-family 30 --workdir /tmp/scale

Corpus: ``benchmarks.scale_corpus`` (code, sql and config tasks with planted exact and near
duplicates, HumanEval contamination, invalid records and repeated ids; a replay file with
``--samples`` completions per task). What runs, each in its own child process (so peak memory
is that run's own: the resident memory of the child and all its descendants, sampled every
0.1 s, beside the child's own ``ru_maxrss``):

  host, at every ``--tasks`` size: (a) the host-only stages on Beam (``scale_stages.host_beam``:
       ingest, validate, exact and near dedup, decontamination, write; the pipeline cut before
       the sandbox) and (b) the plain functions of the same stages outside Beam on the same
       records (the baseline). Growth: records per second at each size relative to the
       smallest size, per stage.
  full, per family on ``--full-per-family`` tasks: the whole curate job through its public
       entry (``pipeline.curate.run.curate``, replay sampler, every sandbox stage on) on the timed
       in-memory runner (``scale_runner``); seconds per task entering each stage.

Wall time per stage on Beam is Beam's own execution timer per transform (the SDK's state
sampler; fused stages are timed apart); what the runner spends between stages is shown as
"runner" (with the whole job: publishing, catalog and report too). When both parts ran, the
projection for ``--project`` tasks on a cluster follows (``scale_project``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.scale_corpus import make_corpus, write_corpus
from benchmarks.scale_project import ORDER, Assumptions, entering, projection
from benchmarks.timing import command_line, goal, machine_line, run_reported

REJECTED_AT = {
    "validate": "Validate",
    "exact_dedup": "ExactDedup",
    "near_dedup": "NearDedup",
    "decontaminate": "Decontaminate",
    "gates": "Gates",
    "test_strength": "TestStrength",
    "rollouts": "Verify",
    "verify": "Verify",
    "ambiguity": "Ambiguity",
    "filter": "Filter",
}


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def child_host(tasks: str, out: str, way: str) -> dict[str, Any]:
    """One host-only run, ``way`` = beam or plain."""
    from benchmarks import scale_stages
    from benchmarks.scale_runner import TIMED_RUNNER, stage_seconds
    from tasksieve.pipeline.curate.config import CurateConfig

    cfg = CurateConfig(inputs=(tasks,), output=out, runner=TIMED_RUNNER)
    t0 = time.perf_counter()
    if way == "plain":
        got = scale_stages.host_plain(cfg, out, "bench")
        return {**got, "wall_s": time.perf_counter() - t0}
    _, result = scale_stages.host_beam(cfg, out, "bench")
    from tasksieve.pipeline.curate.counters import read_counters

    return {
        "records": read_counters(result).values.get("ingest.records", 0),
        "stage_s": stage_seconds(result),
        "reasons": scale_stages.beam_reasons(result),
        "wall_s": time.perf_counter() - t0,
    }


def child_full(tasks: str, replay: str, out: str, samples: int) -> dict[str, Any]:
    """One whole curate job through ``tasksieve.pipeline.curate.run.curate`` on the timed runner."""
    import pyarrow.parquet as pq

    from benchmarks.scale_runner import TIMED_RUNNER, TimedRunner, stage_seconds
    from tasksieve.pipeline.curate.config import CurateConfig
    from tasksieve.pipeline.curate.run import curate
    from tasksieve.transforms.samplers import SamplerConfig

    cfg = CurateConfig(
        inputs=(tasks,),
        output=out,
        sampler=SamplerConfig(backend="replay", replay_path=replay, samples=samples),
        runner=TIMED_RUNNER,
        overwrite=True,
    )
    t0 = time.perf_counter()
    res = curate(cfg)
    wall = time.perf_counter() - t0
    stages: dict[str, int] = {}
    for f in sorted((res.output / "rejected").rglob("*.parquet")):
        for s in pq.read_table(f, columns=["stage"]).column("stage").to_pylist():
            stages[REJECTED_AT.get(s, s)] = stages.get(REJECTED_AT.get(s, s), 0) + 1
    return {
        "records": res.manifest.counts["input"],
        "kept": res.manifest.counts["kept"],
        "stage_s": stage_seconds(TimedRunner.results[-1]),
        "rejected_at": stages,
        "reasons": res.manifest.rejected_by_reason,
        "samples": samples,
        "wall_s": wall,
    }


def run_child(
    argv: list[str], saved: Path | None = None, root: Path | None = None
) -> dict[str, Any]:
    """Run ``python -m benchmarks.scale --child ...``; its JSON plus peak tree memory and CPU.

    Memory: resident bytes of the child and all its descendants, summed, sampled every 0.1 s.
    CPU (``tree_cpu_s``): the child's own plus its descendants' (``tree_cpu``), from the last
    sample of each; a process living less than one sample counts only once its parent reaps
    it. The child's ``cpu_s`` (its rusage) misses sandbox processes still running at its end.

    With ``saved``: reuse that file's result if it exists, else save the new one there.
    With ``root``: run that checkout's code (``export_revision``) instead of this one's."""
    import psutil

    if saved is not None and saved.exists():
        return dict(json.loads(saved.read_text()))

    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        result_file = fh.name
    cmd = [sys.executable, "-m", "benchmarks.scale", "--child", result_file, *argv]
    env = dict(os.environ)
    if root is not None:
        env["PYTHONPATH"] = str(root)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, cwd=root, env=env)
    root, peak = psutil.Process(proc.pid), 0
    own, seen, alive = 0.0, {}, set[int]()  # seen: pid -> (parent, CPU with reaped children)
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
            t = root.cpu_times()
            own = t.user + t.system
            alive = set()
            for p in tree[1:]:
                t = p.cpu_times()
                seen[p.pid] = (p.ppid(), t.user + t.system + t.children_user + t.children_system)
                alive.add(p.pid)
        except psutil.Error:
            pass
        time.sleep(0.1)
    if proc.returncode != 0:
        raise RuntimeError(f"child {argv} exited {proc.returncode}")
    got = json.loads(Path(result_file).read_text())
    os.unlink(result_file)
    got["peak_tree_mb"] = peak / 1e6
    got["tree_cpu_s"] = own + tree_cpu(seen, alive, proc.pid)
    if saved is not None:
        saved.write_text(json.dumps(got))
    return dict(got)


def written_rows(out: Path) -> list[str]:
    """Every row a host-stage run wrote (any Parquet file below ``out``), as sorted JSON."""
    import pyarrow.parquet as pq

    rows = [
        json.dumps(row, sort_keys=True, default=str)
        for f in sorted(out.rglob("*.parquet"))
        for row in pq.read_table(f).to_pylist()
    ]
    return sorted(rows)


def same_rows(work: Path, n: int) -> str:
    """Whether the Beam run and the ``--before`` run at size ``n`` wrote the same rows."""
    now, then = (written_rows(work / f"out-{w}-{n}") for w in ("beam", "before"))
    return "identical" if now == then else f"DIFFER ({len(now)} rows now, {len(then)} before)"


def export_revision(rev: str, dest: Path) -> Path:
    """The files of git revision ``rev`` of this checkout, written once into ``dest/<rev>``
    (``git archive``; the ``tasksieve/`` links come with it), for a same-run baseline."""
    out = dest / f"rev-{rev.replace('/', '_')}"
    if not (out / "benchmarks" / "scale.py").exists():
        out.mkdir(parents=True, exist_ok=True)
        repo = Path(__file__).resolve().parents[1]
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", "--format=tar", rev],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def tree_cpu(seen: dict[int, tuple[int, float]], alive: set[int], root: int) -> float:
    """CPU of the descendants, each counted once: a process that was gone at the last sample
    and whose parent was seen is left out (its parent reaped it, so the parent's figure holds
    it), unless that parent is the root, whose reaped children's CPU is not taken."""
    return sum(
        cpu for pid, (ppid, cpu) in seen.items() if pid in alive or ppid == root or ppid not in seen
    )


def family_sample(lines: list[str], family: str, n: int) -> list[str]:
    """The first ``n`` base tasks of ``family`` (planted records left out)."""
    prefix = f'{{"id": "{family}-'
    return [ln for ln in lines if ln.startswith(prefix)][:n]


def _rate(n: int, s: float) -> str:
    return f"{n / s:,.0f}" if s > 0 else "-"


def report_host(sizes: list[int], runs: dict[int, dict[str, Any]]) -> None:
    """Per stage: seconds and records/s of each way at each size; growth vs the first size;
    then CPU, memory, and the goals against the plain functions and the ``before`` run."""
    ways = [w for w in ("before", "beam", "plain") if w in runs[sizes[0]]]
    print("\n## Host-only stages (records/s per stage; growth = rate / rate at the first size)")
    head = ["stage"] + [f"{w} {n:,}" for n in sizes for w in ways]
    print("| " + " | ".join(head) + " | " + " | ".join(f"growth {w}" for w in ways) + " |")
    print("|" + "---|" * (len(head) + len(ways)))
    from benchmarks.scale_stages import HOST_STAGES

    base = sizes[0]
    for stage in (*HOST_STAGES, "runner", "total"):
        cells, growth = [stage], {}
        for n in sizes:
            for way in ways:
                s = _stage_s(runs[n][way], stage)
                cells.append(f"{s:.1f} s ({_rate(runs[n][way]['records'], s)}/s)")
                if n == sizes[-1] and s > 0:
                    s0 = _stage_s(runs[base][way], stage)
                    growth[way] = (n / s) / (base / s0) if s0 > 0 else 0.0
        grown = " | ".join(f"{growth.get(w, 0):.2f}x" for w in ways)
        print("| " + " | ".join(cells) + f" | {grown} |")
    print("\n| size | way | wall s | CPU s | records/CPU-s | of plain | peak MB | peak KB/task |")
    print("|---|---|---|---|---|---|---|---|")
    for n in sizes:
        plain_rate = n / cpu_of(runs[n]["plain"])
        for way in ways:
            r = runs[n][way]
            rate = n / cpu_of(r)
            print(
                f"| {n:,} | {way} | {r['wall_s']:.1f} | {cpu_of(r):.1f} | {rate:,.0f} | "
                f"{rate / plain_rate:.2f}x | {r['peak_tree_mb']:.0f} | "
                f"{1000 * r['peak_tree_mb'] / n:.1f} |"
            )
    first, last = sizes[0], sizes[-1]
    for way in ways:
        rate0 = first / cpu_of(runs[first][way])
        rate1 = last / cpu_of(runs[last][way])
        print(f"{way}: records per CPU-second at {last:,} / at {first:,}: {rate1 / rate0:.2f}x")
    for n in sizes:
        p = runs[n]["plain"]["reasons"]
        for way in ways[:-1]:
            b = runs[n][way]["reasons"]
            same = "same" if b == p else f"differ: {way} {b} plain {p}"
            print(f"rejections per reason at {n:,}: {way} {b}; plain {same}")
    last_run = runs[last]
    if "beam" in last_run and "plain" in last_run:
        ratio = cpu_of(last_run["plain"]) / cpu_of(last_run["beam"])
        goal(f"Beam host stages per CPU-second / plain at {last:,}", ratio, 0.7)
    if "before" in last_run:
        mem = last_run["beam"]["peak_tree_mb"] / last_run["before"]["peak_tree_mb"]
        goal(f"peak memory per task, now / before at {last:,}", mem, 0.5, higher=False)
    if "before" in last_run and last > first:
        # the part that grows with the run: MB per task added between the two sizes
        added = {
            w: (runs[last][w]["peak_tree_mb"] - runs[first][w]["peak_tree_mb"]) / (last - first)
            for w in ("beam", "before")
        }
        if added["before"] > 0:
            goal(
                f"peak memory per task added from {first:,} to {last:,}, now / before",
                added["beam"] / added["before"],
                0.5,
                higher=False,
            )


def cpu_of(run: dict[str, Any]) -> float:
    """CPU seconds of a child run: its process tree where sampled, else its own rusage."""
    return max(float(run.get("tree_cpu_s", 0.0)), float(run["cpu_s"]), 1e-9)


def _stage_s(run: dict[str, Any], stage: str) -> float:
    st = run["stage_s"]
    if stage == "total":
        return float(run["wall_s"])
    if stage == "runner":
        return max(0.0, run["wall_s"] - sum(st.values()))
    return float(sum(v for k, v in st.items() if k.startswith(stage)))


def report_full(runs: dict[str, dict[str, Any]]) -> None:
    """Per family: seconds per task entering each stage, wall, CPU and peak memory."""
    print("\n## Whole pipeline per family (curate on the timed runner): ms per task entering")
    fams = list(runs)
    print("| stage | " + " | ".join(fams) + " |")
    print("|---|" + "---|" * len(fams))
    for stage in (*ORDER, "Write", "runner"):
        cells = []
        for fam in fams:
            r = runs[fam]
            n = entering(r["records"], r["rejected_at"]).get(stage, r["records"])
            s = _stage_s(r, stage)
            cells.append(f"{1000 * s / max(n, 1):,.0f} ({n})")
        print(f"| {stage} | " + " | ".join(cells) + " |")
    for fam in fams:
        r = runs[fam]
        print(
            f"{fam}: {r['records']} tasks, kept {r['kept']}, wall {r['wall_s']:.0f} s, "
            f"CPU {r.get('tree_cpu_s', 0):.0f} s (process tree; child alone {r['cpu_s']:.0f} s), "
            f"peak {r['peak_tree_mb']:.0f} MB; "
            f"rejected {r['reasons']}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--tasks", default="10000,30000,100000", help="host-stage sizes, comma list")
    ap.add_argument("--full-per-family", type=int, default=30, help="0: skip the whole pipeline")
    ap.add_argument("--samples", type=int, default=4, help="K: completions per task")
    ap.add_argument("--workdir", help="where corpora and outputs go (default: a temp dir)")
    ap.add_argument("--no-beam", action="store_true", help="host stages: plain functions only")
    ap.add_argument(
        "--reuse", action="store_true", help="reuse results saved in --workdir by earlier runs"
    )
    ap.add_argument(
        "--before",
        metavar="REV",
        help="also run the host stages on Beam with git revision REV's code (same corpus)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="host stages: run every way this many times, interleaved (the order rotated each "
        "round), and report each way's round of least CPU",
    )
    ap.add_argument("--project", type=int, default=10_000_000, help="tasks to project for")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        t0 = time.perf_counter()
        mode, *rest = args.rest
        if mode == "full":
            got = child_full(rest[0], rest[1], rest[2], int(rest[3]))
        else:
            got = child_host(rest[0], rest[1], mode)
        got |= {"cpu_s": _cpu_s(), "maxrss_mb": resource.getrusage(0).ru_maxrss / 1e3}
        got["child_s"] = time.perf_counter() - t0
        Path(args.child).write_text(json.dumps(got))
        return 0
    sizes = [int(x) for x in args.tasks.split(",") if x]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="scale-")).resolve()
    print(f"{command_line('benchmarks.scale')}\n{machine_line()}")
    full: dict[str, dict[str, Any]] = {}
    if args.full_per_family:
        corpus = make_corpus(max(20 * args.full_per_family, 200), k=args.samples, seed=11)
        _, replay = write_corpus(corpus, work / "corpus-full")
        for fam in ("code", "sql", "config"):
            lines = family_sample(corpus.lines, fam, args.full_per_family)
            path = work / f"full-{fam}" / "tasks.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n")
            out = str(work / f"full-{fam}" / "out")
            saved = work / f"full-{fam}.json" if args.reuse else None
            full[fam] = run_child(["full", str(path), replay, out, str(args.samples)], saved)
            print(f"  full {fam}: {full[fam]['wall_s']:.1f} s", flush=True)
        report_full(full)
    host: dict[int, dict[str, Any]] = {}
    same: dict[int, list[str]] = {}  # per size, per round: rows written now vs --before
    for n in sizes:
        corpus = make_corpus(n, k=args.samples)
        tasks, _ = write_corpus(corpus, work / f"corpus-{n}")
        print(f"corpus {n:,}: planted {corpus.planted}", flush=True)
        del corpus
        host[n], same[n] = {}, []
        ways = ["plain", "beam"] + (["before"] if args.before else [])
        for r in range(args.rounds):
            for way in ways[r % len(ways) :] + ways[: r % len(ways)]:  # each round rotated
                if way == "beam" and args.no_beam:
                    continue
                saved = work / f"host-{way}-{n}.json" if args.reuse else None
                root = export_revision(args.before, work) if way == "before" else None
                mode = "beam" if way == "before" else way
                out_dir = work / f"out-{way}-{n}"
                if saved is None or not saved.exists():  # no file of an earlier run is read
                    shutil.rmtree(out_dir, ignore_errors=True)
                got = run_child([mode, tasks, str(out_dir)], saved, root)
                print(f"  {way}: {got['wall_s']:.1f} s, CPU {cpu_of(got):.1f} s", flush=True)
                if way not in host[n] or cpu_of(got) < cpu_of(host[n][way]):
                    host[n][way] = got  # the best round of each way
            if args.before:  # every round's rows, not only the last's
                same[n].append(same_rows(work, n))
                print(f"  round {r + 1}: rows written, now vs {args.before}: {same[n][-1]}")
        if args.no_beam:
            host[n]["beam"] = host[n]["plain"]
    if sizes:
        report_host(sizes, host)
    for n in sizes if args.before else []:
        print(f"rows written at {n:,}, this checkout vs {args.before}: {', '.join(same[n])}")
    if host and full:
        print(projection(host[sizes[-1]], sizes[-1], full, Assumptions(tasks=args.project)))
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main, skip_if="--child"))
