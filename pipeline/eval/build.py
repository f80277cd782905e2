"""The eval pipeline: the tasks, then the very sampling and verification stages curate uses.

Tasks come from a curated output (read by the driver, ``pipeline.eval.inputs``) or from task
files through curate's own ``Ingest`` and ``Validate``. One-turn runs sample with curate's
``Rollouts`` and verify with ``EvalVerifyFn``, a ``VerifySamplesFn`` like curate's ``VerifyFn``
that keeps every task instead of judging a band: a task is rejected only when it cannot be
scored at all (the sampler failed it or returned nothing, or every sample hit an infra
error). Multi-turn runs (``--turns`` > 1) use curate's ``Episodes`` as they are; agent runs
(``--agent``) curate's agent stage scored for eval (``pipeline.eval.agent``), which also
writes ``trajectories/`` (one row per step, curate's schema). Nothing is
deduplicated, decontaminated or gated: eval measures the tasks it is given.

Written below the run's staging root: ``rollouts/`` and ``rejected/`` (curate's schemas) and
``meta/`` (task id, family, source, tags, the curated pass rate), which the driver folds into
``scores/`` after the run (``pipeline.eval.scores``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.parquetio import WriteToParquet

from tasksieve.pipeline.eval.agent import EvalAgentEpisodes
from tasksieve.pipeline.eval.config import EvalConfig
from tasksieve.schemas import Verdict
from tasksieve.schemas.arrow import REJECTED_SCHEMA, ROLLOUTS_SCHEMA, TRAJECTORIES_SCHEMA
from tasksieve.transforms.agent.stage import TRAJECTORIES
from tasksieve.transforms.ingest.stage import Ingest
from tasksieve.transforms.ingest.validate import Validate
from tasksieve.transforms.rollouts.multi_turn import Episodes
from tasksieve.transforms.rollouts.rounds import ROLLOUTS, Rollouts, VerifySamplesFn
from tasksieve.transforms.runtime.common import REJECTED, count, rejected
from tasksieve.transforms.runtime.deadletter import Guarded
from tasksieve.transforms.runtime.items import Item, rejection
from tasksieve.transforms.samplers import Samples
from tasksieve.transforms.write import with_fingerprint
from tasksieve.verifiers.rewards import Reward, lint, reward

META_SCHEMA = pa.schema(
    [
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("family", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("curated_pass_rate", pa.float64()),
    ]
)


class EvalVerifyFn(VerifySamplesFn):
    """Verify every sample of a task; emit its rollout rows, reject only what cannot be scored."""

    def process(self, pair: tuple[Item, Samples]) -> Iterator[Any]:
        item, samples = pair
        refused = self.refuse(item, samples)
        if refused is not None:
            yield rejected(refused)
            return
        solutions, verdicts, rows = self.verify_samples(item, samples)
        if item.task.reward.style is not None:
            self.add_style(item, solutions, verdicts, rows)
        for row in rows:
            yield beam.pvalue.TaggedOutput(ROLLOUTS, row)
        infra = [v for v in verdicts if v.status == "infra_error"]
        if infra:
            count("verify.samples_left_out", len(infra))
        if len(infra) == len(verdicts):
            yield rejected(
                rejection(
                    stage="verify",
                    reason="verify.infra_error",
                    detail=f"all {len(verdicts)} samples hit an infra error after "
                    f"{self.retry.attempts} attempts ({infra[0].detail[:300]})",
                    run_id=self.run_id,
                    item=item,
                    n=0,
                    n_requested=samples.requested,
                )
            )

    def add_style(
        self, item: Item, solutions: list[str], verdicts: list[Verdict], rows: list[dict[str, Any]]
    ) -> None:
        """Lint the solutions in the sandbox (one run) and rescore the rows with the style.

        Rows keep their reward without style (``style_checked`` false) when ruff cannot run."""
        styles = lint(self.sandbox, solutions)
        if styles is None:
            count("eval.style_unmeasured")
            return
        count("eval.style_measured", len(styles))
        for row, verdict, style in zip(rows, verdicts, styles, strict=True):
            earned = reward(verdict, item.task.reward, item.reference_s, style)
            if isinstance(earned, Reward):
                row["reward"] = earned.value
                row["reward_components"] = earned.components.model_dump()


def meta_row(item: Item, pass_rates: dict[str, float]) -> dict[str, Any]:
    """The task's row of ``meta/``: what the scores group by."""
    task = item.task
    return {
        "task_id": task.id,
        "family": task.family,
        "source": task.source.dataset,
        "tags": list(task.tags),
        "curated_pass_rate": pass_rates.get(task.id),
    }


def _sink(prefix: str, schema: pa.Schema) -> WriteToParquet:
    return WriteToParquet(
        prefix,
        schema=schema,
        codec="zstd",
        file_name_suffix=".parquet",
        shard_name_template="-SSSSS-of-NNNNN",
    )


def build(
    p: beam.Pipeline,
    cfg: EvalConfig,
    root: str,
    run_id: str,
    items: list[Item] | None,
    pass_rates: dict[str, float],
) -> None:
    """Add the eval stages to ``p``: ``items`` when the driver read them, else the input files."""
    rejects: list[beam.PCollection] = []
    if items is None:
        records = p | "Ingest" >> Ingest(cfg.inputs)
        valid = records | "Validate" >> Validate(run_id)
        tasks = valid["ok"]
        rejects.append(valid[REJECTED])
    else:
        tasks = p | "Tasks" >> beam.Create(items)
    fp = cfg.fingerprint()
    if cfg.agent is not None:
        verified = tasks | "AgentEpisodes" >> EvalAgentEpisodes(
            cfg.sampler, cfg.agent, cfg.sandbox, run_id
        )
        _ = verified[TRAJECTORIES] | "WriteTrajectories" >> _sink(
            f"{root}/trajectories/part", with_fingerprint(TRAJECTORIES_SCHEMA, fp, run_id)
        )
    elif cfg.episodes.turns > 1:
        verified = tasks | "Episodes" >> Episodes(
            cfg.sampler, cfg.episodes, cfg.sandbox, run_id, None, None, None
        )
    else:
        sampled = tasks | "Rollouts" >> Rollouts(cfg.sampler, run_id, None)
        rejects.append(sampled[REJECTED])
        fn = EvalVerifyFn(cfg.sandbox, run_id)
        verified = sampled["ok"] | "Verify" >> Guarded(
            beam.ParDo(fn), "verify", run_id, tags=[ROLLOUTS]
        )
    rejects.append(verified[REJECTED])
    _ = (
        tasks
        | "Meta" >> beam.Map(meta_row, pass_rates)
        | "WriteMeta" >> _sink(f"{root}/meta/part", META_SCHEMA)
    )
    _ = verified[ROLLOUTS] | "WriteRollouts" >> _sink(
        f"{root}/rollouts/part", with_fingerprint(ROLLOUTS_SCHEMA, fp, run_id)
    )
    _ = (
        tuple(rejects)
        | "AllRejected" >> beam.Flatten()
        | "WriteRejected"
        >> _sink(f"{root}/rejected/part", with_fingerprint(REJECTED_SCHEMA, fp, run_id))
    )
