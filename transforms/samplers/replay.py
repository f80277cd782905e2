"""Replay sampler: recorded completions read from JSONL (optionally .gz) or Parquet.

Rows are ``{"task_id": str, "completion": str}`` with an optional ``"model_id"``; a task's
rows are kept in file order and the first K are returned (rows ``first_sample`` on when a
config starts later, as adaptive rounds do). A task with fewer than K rows gets
what there is (``Samples.requested`` still says K, so the pipeline records the shortfall); a
task with no rows gets zero completions (the pipeline rejects it).

Multi-turn runs (``--turns``): a row may carry ``"turn"`` (an integer >= 1, default 1) and,
from turn 2 on, ``"episode"`` (the episode's sample index, >= 0). Rows of turn 1 are the
first attempts, as above: the j-th is episode j's. A later-turn request for episode j of a
task takes its row of that turn with ``"episode": j``, else the j-th row of that turn that
names no episode (file order), else none (the pipeline rejects the task as
``rollouts.turn_missing``). Rows for episodes that passed earlier are never used.

Files are opened through Beam's FileSystems, so any path Beam can read works (local, gs://,
s3:// with the matching extra). What it does NOT do: stream the file (it is read whole, once
per worker), or check that the recorded completions came from the prompt the task has now.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apache_beam.io.filesystems import FileSystems

from tasksieve.transforms.runtime.beam_ml import ModelHandler
from tasksieve.transforms.samplers.config import SamplerConfig, SampleRequest, Samples


class ReplayFileError(ValueError):
    """A replay file that cannot be read as {task_id, completion} rows."""


@dataclass
class Recorded:
    """Completions per task in file order, and the model id recorded with each task's first row."""

    completions: dict[str, list[str]] = field(default_factory=dict)
    model_ids: dict[str, str] = field(default_factory=dict)
    later: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    """Turn >= 2 rows naming no episode, by (task_id, turn), in file order."""
    pinned: dict[tuple[str, int, int], str] = field(default_factory=dict)
    """Turn >= 2 rows naming their episode, by (task_id, turn, episode)."""

    def add(self, where: str, row: Any) -> None:
        """Add one row, raising ReplayFileError (naming ``where``) if it is malformed."""
        if not isinstance(row, dict):
            raise ReplayFileError(f"{where}: expected an object, got {type(row).__name__}")
        task_id, completion = row.get("task_id"), row.get("completion")
        if not isinstance(task_id, str) or not task_id:
            raise ReplayFileError(f"{where}: 'task_id' must be a non-empty string, got {task_id!r}")
        if not isinstance(completion, str):
            raise ReplayFileError(
                f"{where}: 'completion' must be a string, got {type(completion).__name__}"
            )
        mid = row.get("model_id")
        if mid is not None and not isinstance(mid, str):
            raise ReplayFileError(f"{where}: 'model_id' must be a string, got {type(mid).__name__}")
        turn, episode = _turn_fields(where, row)
        if turn > 1 and episode is not None:
            self.pinned.setdefault((task_id, turn, episode), completion)
        elif turn > 1:
            self.later.setdefault((task_id, turn), []).append(completion)
        else:
            self.completions.setdefault(task_id, []).append(completion)
        if mid and task_id not in self.model_ids:
            self.model_ids[task_id] = mid

    def later_turn(self, task_id: str, turn: int, episode: int) -> str | None:
        """The recorded attempt of ``episode`` at ``turn`` (>= 2), or None."""
        pinned = self.pinned.get((task_id, turn, episode))
        if pinned is not None:
            return pinned
        rows = self.later.get((task_id, turn), [])
        return rows[episode] if episode < len(rows) else None


def _turn_fields(where: str, row: dict[str, Any]) -> tuple[int, int | None]:
    """The row's ``turn`` (default 1) and ``episode`` (default None), validated."""
    turn, episode = row.get("turn", 1), row.get("episode")
    if turn is None:
        turn = 1
    if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
        raise ReplayFileError(f"{where}: 'turn' must be an integer >= 1, got {turn!r}")
    if episode is None:
        return turn, None
    if isinstance(episode, bool) or not isinstance(episode, int) or episode < 0:
        raise ReplayFileError(f"{where}: 'episode' must be an integer >= 0, got {episode!r}")
    if turn == 1:
        raise ReplayFileError(
            f"{where}: 'episode' is for rows of turn >= 2 (turn-1 rows are episodes in file order)"
        )
    return turn, episode


def _jsonl_rows(path: str) -> Iterator[tuple[str, Any]]:
    with FileSystems.open(path) as f:  # decompresses .gz by extension
        lineno = 0
        while raw := f.readline():
            lineno += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ReplayFileError(f"{path}:{lineno}: not UTF-8 text ({e.reason})") from e
            if not line.strip():
                continue
            try:
                yield f"{path}:{lineno}", json.loads(line)
            except json.JSONDecodeError as e:
                raise ReplayFileError(f"{path}:{lineno}: not valid JSON ({e.msg})") from e


def _parquet_rows(path: str) -> Iterator[tuple[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with FileSystems.open(path) as f:
            table = pq.read_table(io.BytesIO(f.read()))
    except (pa.ArrowInvalid, OSError) as e:
        raise ReplayFileError(f"{path}: not a readable Parquet file ({e})") from e
    missing = {"task_id", "completion"} - set(table.column_names)
    if missing:
        raise ReplayFileError(
            f"{path}: missing column(s) {', '.join(sorted(missing))}; "
            f"found {', '.join(table.column_names)}"
        )
    for i, row in enumerate(table.to_pylist()):
        yield f"{path}: row {i}", row


def read_replay(path: str) -> Recorded:
    """Read a replay file (.jsonl, .jsonl.gz or .parquet) into completions per task."""
    if not FileSystems.exists(path):
        raise FileNotFoundError(f"replay file not found: {path}")
    rows = _parquet_rows(path) if path.lower().endswith((".parquet", ".pq")) else _jsonl_rows(path)
    recorded = Recorded()
    for where, row in rows:
        recorded.add(where, row)
    return recorded


class ReplayModelHandler(ModelHandler[SampleRequest, Samples, Recorded]):
    """Serve K recorded completions per task (from ``first_sample`` on) from a replay file."""

    def __init__(self, cfg: SamplerConfig) -> None:
        super().__init__(min_batch_size=1, max_batch_size=max(cfg.batch_size, 64))
        if not cfg.replay_path:
            raise ValueError("ReplayModelHandler needs SamplerConfig.replay_path")
        self._cfg = cfg
        self._path = cfg.replay_path

    def batch_elements_kwargs(self) -> Mapping[str, Any]:
        """Replay is a dict lookup, so batches can be large."""
        return {"min_batch_size": 1, "max_batch_size": max(self._cfg.batch_size, 64)}

    def load_model(self) -> Recorded:
        """Read the whole replay file."""
        return read_replay(self._path)

    def run_inference(
        self,
        batch: Sequence[SampleRequest],
        model: Recorded,
        inference_args: dict[str, Any] | None = None,
    ) -> Iterable[Samples]:
        """The first K recorded completions for each request (fewer, or none, if not recorded)."""
        k = self._cfg.samples
        return [
            Samples(
                task_id=req.task_id,
                completions=_recorded(model, req, k, self._cfg.first_sample),
                model_id=model.model_ids.get(req.task_id, self._path),
                sampler="replay",
                requested=k,
            )
            for req in batch
        ]


def _recorded(model: Recorded, req: SampleRequest, k: int, first_sample: int = 0) -> list[str]:
    """The completions for ``req``: K of turn 1 (from ``first_sample`` on, as adaptive rounds
    ask), or one episode's later attempt."""
    first = first_sample + (req.episode or 0)
    if req.turn == 1:
        return list(model.completions.get(req.task_id, [])[first : first + k])
    found = [model.later_turn(req.task_id, req.turn, first + j) for j in range(k)]
    return [c for c in found if c is not None]
