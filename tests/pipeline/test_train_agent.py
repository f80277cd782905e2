"""CPU smoke run of ``tasksieve train --agent``: 2 GRPO steps of the bundled model over agent
episodes on a synthesized repo task (from examples/tasks/repo.jsonl).

The task is first curated with ``curate --agent`` and recorded actions (one episode applies
the reference patch, one does nothing: the task is kept at pass rate 0.5). The training run
then lets the bundled SmolLM2-135M act, two short steps per episode. It mostly answers without
a command, so episodes end on the protocol or step budget with reward 0; what the test checks
is the plumbing: every episode opened a real workspace (its files listed from inside), the
tokens TRL trained on are the episode's (replies under mask 1, observations under mask 0,
TRL's own count of trained tokens equal to ours) and the trainer took both steps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tasksieve.pipeline.cli import main
from tasksieve.transforms.agent import scripted
from tasksieve.transforms.agent.session import Opener
from tasksieve.verifiers.registry import make_sandbox
from tests.curate_flags import FAST

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "examples" / "snapshots"
TASK_IDS = ("repo.toml.6bb3f9da569e",)


def _curate(tmp: Path) -> Path:
    lines = (ROOT / "examples" / "tasks" / "repo.jsonl").read_text().splitlines()
    tasks = [t for t in map(json.loads, lines) if t["id"] in TASK_IDS]
    (tmp / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    python = make_sandbox("process").python
    rows = []
    for t in tasks:
        solve = scripted.apply_command(str(t["reference_solution"]), python)
        rows += [
            {"task_id": t["id"], "completion": scripted.fenced(solve)},
            {"task_id": t["id"], "completion": scripted.fenced("ls")},
            {"task_id": t["id"], "turn": 2, "episode": 0, "completion": scripted.SUBMIT},
            {"task_id": t["id"], "turn": 2, "episode": 1, "completion": scripted.SUBMIT},
        ]
    (tmp / "replay.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp / "curated"
    argv = ["curate", "-i", str(tmp / "tasks.jsonl"), "-o", str(out), "--sampler", "replay"]
    argv += ["--replay", str(tmp / "replay.jsonl"), "--samples", "2", "--agent", "--quiet"]
    argv += ["--snapshot-store", str(SNAPSHOTS), "--too-hard", "0", "--too-easy", "1", *FAST]
    argv += ["--no-humaneval", "--reference-runs", "1"]  # the gates are not the subject
    assert main(argv) == 0
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    tmp = tmp_path_factory.mktemp("train-agent")
    curated = _curate(tmp)
    listings: list[str] = []
    original = Opener.open

    def open_and_look(self: Opener, task: Any) -> Any:  # the workspace, seen from inside
        ws = original(self, task)
        listings.append(ws.exec("ls; ls toml* 2>/dev/null | head -n 3").stdout.decode())
        return ws

    ckpt = tmp / "ckpt"
    argv = ["train", "--tasks", str(curated), "--output", str(ckpt), "--agent", "--steps", "2"]
    argv += ["--num-generations", "2", "--prompts-per-step", "1", "--max-completion-length", "12"]
    argv += ["--agent-max-steps", "2", "--agent-protocol-errors", "2", "--learning-rate", "1e-5"]
    argv += ["--agent-observation-bytes", "300", "--agent-command-timeout", "10"]
    argv += ["--snapshot-store", str(SNAPSHOTS), "--cpu-threads", "2", "--quiet"]
    mp = pytest.MonkeyPatch()
    mp.setattr(Opener, "open", open_and_look)
    try:
        assert main(argv) == 0
    finally:
        mp.undo()
    return ckpt, listings


def _episodes(ckpt: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (ckpt / "episodes.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_every_episode_ran_in_a_real_workspace(trained: tuple[Path, list[str]]) -> None:
    ckpt, listings = trained
    episodes = _episodes(ckpt)
    assert len(episodes) == 4 == len(listings)  # 2 steps x 1 prompt x 2 generations
    assert all("pyproject.toml" in ls or "setup.py" in ls for ls in listings), listings
    assert all(e["task_id"] in TASK_IDS and e["steps"] for e in episodes)
    for e in episodes:  # garbage is fine; an infra error would have failed the run
        assert e["ending"] in ("submitted", "max_steps", "protocol_errors", "session_lost")
        assert e["reward"] in (0.0, 1.0) or 0.0 <= e["reward"] <= 1.0


@pytest.mark.slow
def test_the_mask_covers_the_replies_and_not_the_observations(
    trained: tuple[Path, list[str]],
) -> None:
    from transformers import AutoTokenizer

    ckpt, _ = trained
    tok = AutoTokenizer.from_pretrained(ckpt)
    for e in _episodes(ckpt):
        ids, mask = e["completion_ids"], e["env_mask"]
        assert len(ids) == len(mask) and mask[0] == 1
        spans: list[tuple[int, list[int]]] = []
        for i, m in zip(ids, mask, strict=True):
            if spans and spans[-1][0] == m:
                spans[-1][1].append(i)
            else:
                spans.append((m, [i]))
        replies = [tok.decode(s, skip_special_tokens=True) for m, s in spans if m == 1]
        assert replies == [s["reply"] for s in e["steps"]]
        observed = [tok.decode(s) for m, s in spans if m == 0]
        assert len(observed) == len(e["steps"]) - 1  # between replies, none after the last
        for text, step in zip(observed, e["steps"], strict=False):
            assert step["observation"].strip() in text


@pytest.mark.slow
def test_trl_trained_on_those_tokens_and_stepped(trained: tuple[Path, list[str]]) -> None:
    ckpt, _ = trained
    rows = [json.loads(line) for line in (ckpt / "metrics.jsonl").read_text().splitlines()]
    steps = {r["step"]: r for r in rows if "loss" in r}
    assert sorted(steps) == [1, 2]
    episodes = _episodes(ckpt)
    for step, row in steps.items():
        mine = [e["model_tokens"] for e in episodes if e["train_step"] == step - 1]
        assert len(mine) == 2
        assert row["completions/mean_length"] == pytest.approx(sum(mine) / len(mine))
    lineage = json.loads((ckpt / "tasksieve_lineage.json").read_text())
    assert lineage["agent"]["max_steps"] == 2 and sum(lineage["agent"]["episodes"].values()) == 4
    assert (ckpt / "model.safetensors").is_file()


def _plan(tmp: Path, families: tuple[str, ...], **fields: Any) -> Any:
    from types import SimpleNamespace

    from tasksieve.pipeline.train.data import TrainTask
    from tasksieve.pipeline.train.rewards import RetryPolicy
    from tasksieve.pipeline.train.run import Plan
    from tasksieve.schemas import TaskRecord
    from tasksieve.verifiers import SandboxConfig

    first = {
        "code": (ROOT / "examples" / "tasks" / "code.jsonl").read_text().splitlines()[0],
        "repo": (ROOT / "examples" / "tasks" / "repo.jsonl").read_text().splitlines()[0],
    }
    tasks = [TrainTask(TaskRecord.model_validate_json(first[f]), 0.5, None) for f in families]
    manifest = SimpleNamespace(config={"sandbox": {"snapshot_store": None}})
    base = dict(
        run=tmp, manifest=manifest, tasks=tasks, output=tmp / "ckpt", model_dir=None,
        sandbox=SandboxConfig(), retry=RetryPolicy(),
    )  # fmt: skip
    return Plan(**{**base, **fields})


def _args(*extra: str) -> Any:
    from tasksieve.pipeline.cli import build_parser

    return build_parser().parse_args(["train", "--tasks", "x", "--output", "y", "--agent", *extra])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--use-vllm",), "--use-vllm is not supported"),
        (("--agent-tools",), "--agent-tools is not supported"),
    ],
)
def test_agent_training_refuses_what_it_does_not_support(
    tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    from tasksieve.pipeline.train.agent import check_agent
    from tasksieve.pipeline.train.data import TrainInputError

    with pytest.raises(TrainInputError, match=message):
        check_agent(_args(*extra), _plan(tmp_path, ("repo",)))


def test_agent_training_keeps_only_repo_tasks(tmp_path: Path) -> None:
    from tasksieve.pipeline.train.agent import check_agent
    from tasksieve.pipeline.train.data import TrainInputError

    args = _args("--snapshot-store", str(SNAPSHOTS), "--agent-max-steps", "4")
    plan, cfg, store = check_agent(args, _plan(tmp_path, ("code", "repo")))
    assert [t.task.family for t in plan.tasks] == ["repo"] and cfg.max_steps == 4
    assert store == str(SNAPSHOTS.resolve())
    with pytest.raises(TrainInputError, match="no kept repo tasks"):
        check_agent(args, _plan(tmp_path, ("code",)))


def test_agent_training_needs_a_snapshot_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tasksieve.pipeline.train.agent import check_agent
    from tasksieve.pipeline.train.data import TrainInputError

    monkeypatch.delenv("TASKSIEVE_SNAPSHOT_STORE", raising=False)
    with pytest.raises(TrainInputError, match="no snapshot store"):
        check_agent(_args(), _plan(tmp_path, ("repo",)))


def test_agent_training_exits_2_on_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "--tasks", str(tmp_path / "none"), "--output", str(tmp_path / "o")]
    assert main([*argv, "--agent"]) == 2
    assert "tasksieve train:" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    from tasksieve.transforms.samplers.model_cache import ensure_default_model

    return AutoTokenizer.from_pretrained(ensure_default_model())


def _turn() -> Any:
    """The first turn of episode 0 of the first repo example."""
    from tasksieve.pipeline.train.agent_rollout import user_message
    from tasksieve.schemas import TaskRecord
    from tasksieve.transforms.agent.policies import Turn
    from tasksieve.transforms.agent.protocol import SYSTEM_PROMPT

    line = (ROOT / "examples" / "tasks" / "repo.jsonl").read_text().splitlines()[0]
    task = TaskRecord.model_validate_json(line)
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_message(task)},
    ]
    return Turn(task, 0, 1, tuple(messages))


def test_an_observation_is_the_template_turn_after_the_reply(tokenizer: Any) -> None:
    from tasksieve.pipeline.train.agent_policy import StreamPolicy

    policy = StreamPolicy(None, tokenizer, 8, 1.0, "m")
    head = _turn().messages
    closed = tokenizer.decode(policy.observation_ids(head, "exit 0: ok", closed=True))
    cut = tokenizer.decode(policy.observation_ids(head, "exit 0: ok", closed=False))
    assert closed == "\n<|im_start|>user\nexit 0: ok<|im_end|>\n<|im_start|>assistant\n"
    assert cut == "<|im_end|>" + closed  # a reply cut at the token cap gets its end tag here


def test_a_failed_generation_ends_the_episodes_as_policy_errors(tokenizer: Any) -> None:
    from tasksieve.pipeline.train.agent_policy import StreamPolicy

    class Broken:
        def generate(self, **_: Any) -> Any:
            raise RuntimeError("out of memory")

    policy = StreamPolicy(Broken(), tokenizer, 8, 1.0, "m")
    (reply,) = policy.act([_turn()])
    assert reply.error is not None and "out of memory" in reply.error
