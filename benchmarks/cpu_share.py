"""The CPU sampler alone and beside busy processes, with OpenMP's default and passive waits.

Each measurement is a fresh interpreter (OpenMP reads its wait policy when torch loads) that
loads the bundled model the way the transformers sampler does (``load_model``: threads from
``cpu_threads()``) and times greedy generation of exactly ``--tokens`` tokens for one
prompt, after a warm-up. Settings:

- default: torch imported before ``transforms``, so OpenMP keeps its default (spinning) waits,
  as the sampler ran before;
- passive: ``OMP_WAIT_POLICY=PASSIVE``, which importing ``transforms`` now sets;
- passive, 1 thread: the same with ``OMP_NUM_THREADS=1``.

Each setting is timed alone and beside ``--hogs`` busy loops (subprocesses at the same
priority that stop by themselves after ``--hog-seconds``), in the same run; the table gives
tokens per second and the ratio beside/alone, next to the CPU share a fair scheduler would
give the sampler (threads / (threads + hogs) of the cores it can use, relative to alone).

    python -m benchmarks.cpu_share --tokens 16 --hogs 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.timing import command_line, machine_line, run_reported

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Write a Python function add(a, b) that returns the sum of a and b."


def child(tokens: int, policy: str) -> None:
    """Measure one setting in this (fresh) process and print {threads, tokens_per_s}."""
    if policy == "default":
        import torch
    from tasksieve.transforms.samplers import SamplerConfig
    from tasksieve.transforms.samplers.hf import TransformersModelHandler

    handler = TransformersModelHandler(SamplerConfig(max_new_tokens=tokens))
    loaded = handler.load_model()
    import torch

    tok, model = loaded.tokenizer, loaded.model
    ids = tok(PROMPT, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        model.generate(ids, max_new_tokens=2, do_sample=False)
        start = time.perf_counter()
        model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
        seconds = time.perf_counter() - start
    result = {"threads": torch.get_num_threads(), "tokens_per_s": tokens / seconds}
    print(json.dumps({**result, "policy": os.environ.get("OMP_WAIT_POLICY", "")}))


def measure(
    tokens: int, policy: str, timeout_s: float, threads: int | None = None
) -> dict[str, float] | None:
    """Run ``child`` in a fresh interpreter; None when it ran past ``timeout_s``."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    cmd = [sys.executable, "-m", "benchmarks.cpu_share", "--child", policy, "--tokens", str(tokens)]
    try:
        out = subprocess.run(
            cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, check=True
        )
    except subprocess.TimeoutExpired:
        return None
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def start_hogs(n: int, seconds: float) -> list[subprocess.Popen[bytes]]:
    """``n`` busy loops that stop by themselves after ``seconds``."""
    loop = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n pass"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(n)]


def stop_hogs(hogs: list[subprocess.Popen[bytes]]) -> None:
    for h in hogs:
        if h.poll() is None:
            h.terminate()
        h.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--hogs", type=int, default=2)
    ap.add_argument("--hog-seconds", type=float, default=240.0)
    ap.add_argument("--timeout", type=float, default=240.0, help="per measurement (s)")
    ap.add_argument("--child", choices=["default", "passive"], help=argparse.SUPPRESS)
    ap.add_argument("--skip-default", action="store_true", help="skip the spinning baseline")
    args = ap.parse_args(argv)
    if args.child:
        child(args.tokens, args.child)
        return 0
    print(command_line("benchmarks.cpu_share"))
    rows = []
    settings = [("default", None), ("passive", None), ("passive", 1)]
    for policy, threads in settings[1:] if args.skip_default else settings:
        print(f"{policy}: alone ({machine_line()})", flush=True)
        alone = measure(args.tokens, policy, args.timeout, threads)
        hogs = start_hogs(args.hogs, args.hog_seconds)
        try:
            time.sleep(1.0)
            print(f"{policy}: beside {args.hogs} hogs ({machine_line()})", flush=True)
            beside = measure(args.tokens, policy, args.timeout, threads)
        finally:
            stop_hogs(hogs)
        rows.append((policy, alone, beside))
    print("\n| waits | threads | tokens/s alone | tokens/s beside hogs | ratio | share if idle |")
    print("|---|---|---|---|---|---|")
    for policy, alone, beside in rows:
        threads = int((alone or beside or {"threads": 0})["threads"])
        fair = threads / (threads + args.hogs) * min(os.cpu_count() or 1, threads + args.hogs)
        fair /= min(os.cpu_count() or 1, max(threads, 1))
        a = f"{alone['tokens_per_s']:.2f}" if alone else f"< {args.tokens / args.timeout:.2f}"
        b = f"{beside['tokens_per_s']:.2f}" if beside else f"< {args.tokens / args.timeout:.2f}"
        ratio = f"{beside['tokens_per_s'] / alone['tokens_per_s']:.2f}" if alone and beside else "-"
        print(f"| {policy} | {threads} | {a} | {b} | {ratio} | {fair:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(run_reported(main, skip_if="--child"))
