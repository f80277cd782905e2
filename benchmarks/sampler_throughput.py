"""Sampler throughput: the openai sampler with N requests in flight against one at a time.

One local ``transformers serve`` (the bundled SmolLM2-135M, on the CPU) serves both setups in
the same run, with the same tasks (the first ``--tasks`` prompts of examples/tasks, all four
families), K samples each, the same per-sample seeds and temperature 0, so the server is
deterministic and both setups must return the same completions (checked every round; a
difference is printed and the exit status is 1). Setups, order rotated each round:

- serial: ``--sampler openai --max-concurrency 1`` (one request at a time);
- concurrent: ``--sampler openai --max-concurrency N``.

Then the in-process CPU ``transformers`` sampler draws the same samples (batch of 4 tasks,
no early stop after the code block, so both generate up to the same token limit) and its
tokens per second are reported, with how many of its completions equal the server's (the
same weights and greedy decoding; batching with padding may flip a near tie).

    python -m benchmarks.sampler_throughput --tasks 6 --samples 2 --max-tokens 32 --in-flight 8
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks.local_server import ServeProcess, free_port, serve_command
from benchmarks.timing import command_line, machine_line, rotated, run_reported
from tasksieve.transforms.samplers import (
    SamplerConfig,
    SampleRequest,
    Samples,
    ensure_default_model,
)
from tasksieve.transforms.samplers.openai_sampler import OpenAIModelHandler, sample_tasks

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "tasks"


def requests(n: int) -> list[SampleRequest]:
    """The first ``n`` example tasks, taking the families in turn."""
    by_family = []
    for family in ("code", "sql", "config", "api"):
        text = (EXAMPLES / f"{family}.jsonl").read_text()
        by_family.append([json.loads(line) for line in text.splitlines() if line.strip()])
    out: list[SampleRequest] = []
    i = 0
    while len(out) < n and any(i < len(rows) for rows in by_family):
        for rows in by_family:
            if i < len(rows) and len(out) < n:
                r = rows[i]
                entry = r["verifier"].get("entry_point")
                out.append(SampleRequest(r["id"], r["family"], r["prompt"], entry))
        i += 1
    return out


@dataclass(frozen=True)
class Result:
    label: str
    seconds: float
    completions: int
    tokens: int
    texts: dict[tuple[str, int], str]

    @property
    def per_s(self) -> float:
        return self.completions / self.seconds

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds


def run_openai(cfg: SamplerConfig, reqs: list[SampleRequest], label: str) -> Result:
    handler = OpenAIModelHandler(cfg)
    conn = handler.load_model()
    try:
        t0 = time.perf_counter()
        out, _ = sample_tasks(conn, cfg, reqs)
        seconds = time.perf_counter() - t0
    finally:
        conn.pool.shutdown()
    errors = [s.error for s in out if s.error]
    if errors:
        raise RuntimeError(f"{label}: {len(errors)} task(s) failed: {errors[0]}")
    return _result(label, seconds, out)


def run_transformers(cfg: SamplerConfig, reqs: list[SampleRequest]) -> Result:
    from tasksieve.transforms.samplers.hf import TransformersModelHandler

    handler = TransformersModelHandler(cfg)
    model = handler.load_model()
    t0 = time.perf_counter()
    out: list[Samples] = []
    for i in range(0, len(reqs), cfg.batch_size):
        out.extend(handler.run_inference(reqs[i : i + cfg.batch_size], model))
    return _result("transformers sampler, in process", time.perf_counter() - t0, out)


def _result(label: str, seconds: float, out: list[Samples]) -> Result:
    texts = {(s.task_id, j): c for s in out for j, c in enumerate(s.completions)}
    tokens = sum(m.completion_tokens or 0 for s in out for m in s.meta)
    return Result(label, seconds, len(texts), tokens, texts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=6)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--in-flight", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-transformers", action="store_true", help="skip the in-process sampler")
    args = ap.parse_args(argv)
    if serve_command() is None:
        print("needs the transformers CLI (pip install 'tasksieve[cpu]' fastapi uvicorn)")
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server on the way out
    reqs = requests(args.tasks)
    model_dir = ensure_default_model()
    base = SamplerConfig(
        samples=args.samples,
        max_new_tokens=args.max_tokens,
        temperature=0.0,
        seed=0,
        stop_after_code=False,
    )
    print(command_line("benchmarks.sampler_throughput"))
    print(f"{len(reqs)} tasks x {args.samples} samples, <= {args.max_tokens} tokens, temp 0")
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        server = ServeProcess(model_dir, free_port(), Path(tmp) / "serve.log", threads=None)
        server.start()
        try:
            server_cfg = replace(
                base, backend="openai", endpoint=f"{server.url}/v1", model=str(model_dir)
            )
            setups = {
                "serial": replace(server_cfg, max_concurrency=1),
                "concurrent": replace(server_cfg, max_concurrency=args.in_flight),
            }
            run_openai(setups["serial"], reqs[:1], "warm-up")
            results: dict[str, list[Result]] = {k: [] for k in setups}
            for r in range(args.rounds):
                print(f"round {r + 1}: {machine_line()}")
                for key in rotated(list(setups), r):
                    label = f"openai, {setups[key].max_concurrency} in flight"
                    results[key].append(run_openai(setups[key], reqs, label))
                a, b = results["serial"][-1], results["concurrent"][-1]
                if a.texts != b.texts:
                    failed = True
                    diff = [k for k in a.texts if a.texts[k] != b.texts.get(k)]
                    print(f"  DIFFERENT outputs for {len(diff)} samples, e.g. {diff[:3]}")
        finally:
            server.stop()
    hf = None if args.no_transformers else run_transformers(replace(base, batch_size=4), reqs)
    print("\n| setup | completions/s | tokens/s | ratio to serial |\n|---|---|---|---|")
    serial = max(res.per_s for res in results["serial"])
    rows = [max(results[k], key=lambda res: res.per_s) for k in setups]
    rows += [hf] if hf else []
    for res in rows:
        ratio = res.per_s / serial
        print(f"| {res.label} | {res.per_s:.2f} | {res.tokens_per_s:.1f} | {ratio:.2f}x |")
    print("(best of the rounds; tokens/s counts completion tokens the sampler reported)")
    same = results["serial"][-1].texts
    print(f"openai setups returned identical completions: {'no' if failed else 'yes'}")
    if hf:
        agree = sum(hf.texts.get(k) == v for k, v in same.items())
        print(f"transformers sampler equal to the server's: {agree} of {len(same)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_reported(main))
