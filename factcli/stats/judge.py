"""Pass rates corrected for the judge's measured errors (Rogan and Gladen, 1978).

A judge with sensitivity Se (it passes that share of truly good outputs) and specificity Sp (it
fails that share of truly bad ones) reports an observed pass rate p. The true rate θ satisfies
p = θ·Se + (1 − θ)(1 − Sp), so θ = (p + Sp − 1) / (Se + Sp − 1), clipped to [0, 1]. Its variance
carries the sample's uncertainty and the calibration's own:
V = [p(1−p)/N + θ²·Se(1−Se)/n₊ + (1−θ)²·Sp(1−Sp)/n₋] / (Se + Sp − 1)², with N the graded rows and
n₊, n₋ the calibration's gold-pass and gold-fail items. When Se + Sp − 1 ≤ 0.05 the judge is no
better than chance and no corrected rate is given.

The assumption: the judge errs on this eval's outputs as it erred on the calibration items.
"""

from __future__ import annotations

import math
from typing import Any

from factcli.stats.intervals import Z95
from factcli.types import grader_errored

CHANCE_MARGIN = 0.05  # Youden's J at or below this: the judge carries (almost) no information


def rogan_gladen(passes: int, n: int, tp: int, fn: int, fp: int, tn: int) -> dict:
    """The corrected pass rate of `passes` out of `n` graded rows, for a judge with this confusion
    matrix on its calibration items (positive class: pass)."""
    n_pos, n_neg = tp + fn, tn + fp
    se = tp / n_pos if n_pos else None
    sp = tn / n_neg if n_neg else None
    p = passes / n if n else None
    out: dict[str, Any] = {"n": n, "observedPassRate": p, "sensitivity": se, "specificity": sp,
                           "calibrationN": {"pass": n_pos, "fail": n_neg}, "correctedPassRate": None,
                           "ci95": None, "method": "rogan-gladen"}
    if se is None or sp is None:
        out["note"] = "the calibration has no gold-pass or no gold-fail items"
        return out
    j = se + sp - 1
    if j <= CHANCE_MARGIN + 1e-12:  # 0.55 + 0.5 - 1 is 0.05000000000000004 in floating point
        out["note"] = f"the judge is no better than chance on its calibration (Se + Sp - 1 = {j:.2f})"
        return out
    if p is None:
        out["note"] = "no graded rows"
        return out
    theta = min(1.0, max(0.0, (p + sp - 1) / j))
    variance = (p * (1 - p) / n + theta ** 2 * se * (1 - se) / n_pos + (1 - theta) ** 2 * sp * (1 - sp) / n_neg) / j ** 2
    margin = Z95 * math.sqrt(variance)
    out.update(correctedPassRate=theta, ci95=[max(0.0, theta - margin), min(1.0, theta + margin)])
    return out


def _stamps(grading: Any, out: list) -> None:
    if grading is None:
        return
    stamp = grading.metadata.get("judgeCalibration")
    if isinstance(stamp, dict):
        out.append((stamp, grading.passed, grader_errored(grading)))
    for child in grading.component_results:
        if child is not grading and (child.metadata or child.component_results):  # else: nothing to find
            _stamps(child, out)


class JudgeTally:
    """One column's calibrated assertions, counted row by row: graded rows and passes per assertion
    (keyed by its metric name, else its type); grading errors are left out."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[str, dict] = {}

    def add(self, row: Any) -> None:
        found: list = []
        _stamps(getattr(row, "grading", None), found)
        for stamp, passed, error in found:
            entry = self.counts.setdefault(str(stamp.get("key")), {"stamp": stamp, "n": 0, "passes": 0})
            if not error:
                entry["n"] += 1
                entry["passes"] += bool(passed)

    def reports(self) -> list[dict]:
        out = []
        for key, e in self.counts.items():
            s = e["stamp"]
            report = rogan_gladen(e["passes"], e["n"], *(int(s.get(k) or 0) for k in ("tp", "fn", "fp", "tn")))
            out.append({"assertion": key, "calibrationLabel": s.get("label"), **report})
        return out


def describe(entry: dict) -> str:
    """`factuality 72.0% → 68.3% corrected for the judge [61.2, 75.4]`, or why there is no correction."""
    observed = entry.get("observedPassRate")
    head = f"{entry['assertion']} {'n/a' if observed is None else f'{observed * 100:.1f}%'}"
    corrected = entry.get("correctedPassRate")
    if corrected is None:
        return f"{head} → n/a corrected for the judge: {entry.get('note', 'no correction')}"
    low, high = entry["ci95"]
    return (f"{head} → {corrected * 100:.1f}% corrected for the judge [{low * 100:.1f}, {high * 100:.1f}] "
            f"(Se {entry['sensitivity'] * 100:.0f}%, Sp {entry['specificity'] * 100:.0f}%, n={entry['n']})")
