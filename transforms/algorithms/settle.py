"""Whether a task's band is settled without the samples that infra errors took away.

A sample whose verification still hits ``infra_error`` after its retries is left out of n:
the task is scored on the k of n samples that were verified. That is only sound when the
missing samples could not change the task's band (``BandConfig``). The band is *settled* when
n >= 1 and either

1. every possible outcome of the d missing samples gives the same band: the rates
   ``k / (n + d)`` (all would have failed) and ``(k + d) / (n + d)`` (all would have passed)
   classify like ``k / n``; or
2. the 95% Wilson interval of ``k / n`` lies inside that band's region (``(too_hard,
   too_easy)`` for keep, ``[0, too_hard]`` for too_hard, ``[too_easy, 1]`` for too_easy): the
   verified samples alone place the task with confidence, whatever the missing ones did.

Otherwise (no sample left, or too few to say) the task is rejected as ``verify.infra_error``
with the evidence. Examples with the default band (keep 0 < rate < 1): 3 of 7 with 1 missing
is settled (any outcome still keeps it); 0 of 7 with 1 missing is not (a pass would keep it).

It does NOT guard against: infra errors that are correlated with the outcome (a solution that
reliably breaks the environment is left out every time; its verdicts are in rollouts/).
"""

from __future__ import annotations

from tasksieve.transforms.algorithms.stats import BandConfig, wilson_interval


def band_settled(k: int, n: int, missing: int, band: BandConfig) -> tuple[bool, str]:
    """Whether k of n verified samples settle the band with ``missing`` samples left out, and
    why (one line, for the rejection's detail or the log)."""
    if n == 0:
        return False, f"no sample left to score ({missing} lost to infra errors)"
    here = band.classify(k / n)
    if missing == 0:
        return True, f"{k}/{n}: {here}"
    low = band.classify(k / (n + missing))
    high = band.classify((k + missing) / (n + missing))
    if low == here == high:
        return True, f"{k}/{n}: {here} whatever the {missing} missing samples did"
    lo, hi = wilson_interval(k, n)
    inside = {
        "keep": band.too_hard < lo and hi < band.too_easy,
        "too_hard": hi <= band.too_hard,
        "too_easy": lo >= band.too_easy,
    }[here]
    span = f"95% CI {lo:.2f}-{hi:.2f}"
    if inside:
        return True, f"{k}/{n}: {here} ({span} inside the band's region)"
    return False, (
        f"{k}/{n} verified, {missing} lost to infra errors: {here} now, but the missing samples "
        f"could make it {low if low != here else high} and the {span} does not settle it"
    )
