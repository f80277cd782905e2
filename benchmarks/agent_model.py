"""The share of an agent episode's wall time in the sandbox vs waiting for the model.

The model is the project's stand-in server: ``transformers serve`` of the bundled SmolLM2-135M
on this machine's CPU (``benchmarks.local_server``), reached by the ``openai`` sampler. A model
that small does not follow the action protocol, so ``PacedPolicy`` asks it for every turn (the
real conversation so far, a real completion of up to ``max_new_tokens`` tokens) and then acts
with the scripted agent's reply: the model's time is real, the actions are the benchmark's.
Episodes run through ``run_episodes`` on the process backend; the driver asks the policy for
every open episode in one call, then runs the steps, so an episode is either waiting for the
model or in the sandbox (or in the driver's own bookkeeping, counted with the sandbox).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks.agent_steps import Ours, load_task
from benchmarks.local_server import ServeProcess, free_port, serve_command
from benchmarks.timing import command_line, run_reported
from tasksieve.transforms.agent.policies import Reply, SamplerPolicy, Turn
from tasksieve.transforms.agent.scripted import ScriptedPolicy
from tasksieve.transforms.samplers import SamplerConfig
from tasksieve.transforms.samplers.model_cache import ensure_default_model
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox


@dataclass
class PacedPolicy:
    """Asks a real model every turn, waits for it, then answers with the scripted reply."""

    model: SamplerPolicy
    script: ScriptedPolicy
    tools: bool = False
    name: str = "paced"
    model_id: str = "paced"
    model_s: float = 0.0
    calls: int = 0
    failures: int = 0

    def act(self, turns: Sequence[Turn]) -> list[Reply]:
        t0 = time.perf_counter()
        said = self.model.act(turns)
        self.model_s += time.perf_counter() - t0
        self.calls += len(turns)
        self.failures += sum(r.error is not None for r in said)
        return self.script.act(turns)

    def close(self) -> None:
        self.model.close()


def model_share(quick: bool = False, episodes: int = 4, max_new_tokens: int = 48) -> int:
    """Run ``episodes`` episodes at once with the model in the loop; print the shares."""
    if serve_command() is None:
        print("model share: skipped (the transformers CLI is not installed)")
        return 0
    episodes = 2 if quick else episodes
    model_dir = ensure_default_model()
    with tempfile.TemporaryDirectory() as tmp:
        server = ServeProcess(model_dir, free_port(), Path(tmp) / "serve.log", threads=None)
        server.start()
        sandbox = ProcessSandbox()
        try:
            cfg = SamplerConfig(
                backend="openai", endpoint=f"{server.url}/v1", model=str(model_dir),
                max_new_tokens=max_new_tokens, temperature=0.0, stop_after_code=False,
                max_concurrency=episodes, samples=1,
            )  # fmt: skip
            ours = Ours(sandbox, load_task())
            script = ours.policy
            assert isinstance(script, ScriptedPolicy)
            policy = PacedPolicy(SamplerPolicy(replace(cfg)), script)
            ours.policy = policy
            policy.model.act([])  # load the client before the clock starts
            t0 = time.perf_counter()
            done = ours.run(episodes, episodes)
            wall = time.perf_counter() - t0
        finally:
            sandbox.close()
            server.stop()
    problems = ours.problems(done)
    in_steps = sum(s.duration_s for e in done for s in e.steps) / len(done)
    mean_wall = sum(e.wall_s for e in done) / len(done)
    print(f"model share: {episodes} episodes at once on the process backend, model "
          f"SmolLM2-135M, transformers serve (CPU), <= {max_new_tokens} tokens/reply")  # fmt: skip
    print(f"  wall {wall:.1f} s; waiting for the model {policy.model_s:.1f} s "
          f"({100 * policy.model_s / wall:.1f}%), the rest {wall - policy.model_s:.1f} s "
          f"({100 * (wall - policy.model_s) / wall:.1f}%: sandbox steps, opening and closing "
          "sessions, the driver)")  # fmt: skip
    print(f"  per episode: wall {mean_wall:.2f} s, of which in its own sandbox commands "
          f"{in_steps:.2f} s ({100 * in_steps / mean_wall:.1f}%)")  # fmt: skip
    print(f"  model calls {policy.calls}, failed {policy.failures}; wrong episodes {len(problems)}")
    return 1 if problems or policy.failures else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--episodes", type=int, default=2, help="episodes at once")
    ap.add_argument("--max-tokens", type=int, default=48, help="tokens per model reply")
    a = ap.parse_args(argv)
    print(command_line("benchmarks.agent_model"))
    return model_share(episodes=a.episodes, max_new_tokens=a.max_tokens)


if __name__ == "__main__":
    sys.exit(run_reported(lambda: main()))
