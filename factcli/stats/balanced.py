"""Balanced accuracy (BAcc) of a binary judge and its 95% intervals: the figure grounding-judge
leaderboards (LLM-AggreFact) rank by.

    BAcc = (TPR + TNR) / 2,   TPR = TP / (TP + FN) over gold-positive rows, TNR = TN / (TN + FP) over gold-negative rows

Intervals (docs/statistics.md, "Balanced accuracy"):
- one dataset: the Wilson intervals of TPR and of TNR (two independent samples: different rows)
  combined by MOVER (Zou & Donner 2008, as Newcombe does for a difference) for their mean:
      low  = BAcc − √((TPR − l_TPR)² + (TNR − l_TNR)²) / 2
      high = BAcc + √((u_TPR − TPR)² + (u_TNR − TNR)²) / 2
- the mean of k datasets' BAcc (the leaderboard's figure): MOVER again over the datasets (each its
  own rows, so independent):  low = m − √(Σ(b_i − l_i)²) / k,  high = m + √(Σ(u_i − b_i)²) / k.
- two judges on the same rows: the paired differences of TPR (gold-positive rows) and of TNR
  (gold-negative rows), each Newcombe's paired interval (intervals.newcombe_paired), combined by
  MOVER for their mean; over datasets, MOVER as for the mean.

A dataset with no gold-positive or no gold-negative row has no BAcc (None), never 0.
"""

from __future__ import annotations

import math
from typing import Sequence

from factcli.stats.intervals import newcombe_paired, wilson_interval


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def balanced_accuracy(tp: int, fn: int, fp: int, tn: int) -> dict:
    """{"bacc", "tpr", "tnr", "low", "high", "method"}; every figure None when a class has no row."""
    tpr, tnr = _ratio(tp, tp + fn), _ratio(tn, tn + fp)
    if tpr is None or tnr is None:
        return {"bacc": None, "tpr": tpr, "tnr": tnr, "low": None, "high": None, "method": "wilson+mover"}
    a, b = wilson_interval(tp, tp + fn), wilson_interval(tn, tn + fp)
    bacc = (tpr + tnr) / 2
    low = bacc - math.sqrt((tpr - a["low"]) ** 2 + (tnr - b["low"]) ** 2) / 2
    high = bacc + math.sqrt((a["high"] - tpr) ** 2 + (b["high"] - tnr) ** 2) / 2
    return {"bacc": bacc, "tpr": tpr, "tnr": tnr, "low": max(0.0, low), "high": min(1.0, high),
            "method": "wilson+mover"}


def mover_mean(parts: Sequence[tuple[float, float, float]]) -> dict | None:
    """The mean of k independent estimates, each (value, low, high), with its MOVER interval."""
    parts = [p for p in parts if p[0] is not None]
    if not parts:
        return None
    k = len(parts)
    m = math.fsum(v for v, _, _ in parts) / k
    low = m - math.sqrt(math.fsum((v - lo) ** 2 for v, lo, _ in parts)) / k
    high = m + math.sqrt(math.fsum((hi - v) ** 2 for v, _, hi in parts)) / k
    return {"value": m, "low": low, "high": high, "k": k, "method": "mover"}


def paired_bacc_difference(positive: Sequence[tuple[bool, bool]], negative: Sequence[tuple[bool, bool]]) -> dict | None:
    """BAcc of B − BAcc of A over the same rows. `positive`: (A passed, B passed) on gold-positive
    rows; `negative`: the same on gold-negative rows. None when a class has no pair."""
    if not positive or not negative:
        return None
    d_tpr = newcombe_paired([(float(a), float(b)) for a, b in positive])
    # on gold-negative rows a judge is right when it fails the row: compare correctness
    d_tnr = newcombe_paired([(float(not a), float(not b)) for a, b in negative])
    d1, (l1, u1) = d_tpr["delta"], d_tpr["ci95"]
    d2, (l2, u2) = d_tnr["delta"], d_tnr["ci95"]
    d = (d1 + d2) / 2
    low = d - math.sqrt((d1 - l1) ** 2 + (d2 - l2) ** 2) / 2
    high = d + math.sqrt((u1 - d1) ** 2 + (u2 - d2) ** 2) / 2
    return {"delta": d, "low": low, "high": high, "tpr": d_tpr, "tnr": d_tnr,
            "method": "newcombe paired + mover", "n": len(positive) + len(negative)}


def best_threshold(rows: Sequence[tuple[str, float, bool]]) -> dict | None:
    """The threshold t (a row passes when score >= t) that maximizes the mean over datasets of BAcc,
    from rows (dataset, score, gold). Candidates: every distinct score; ties go to the lowest t."""
    if not rows:
        return None
    datasets = sorted({d for d, _, _ in rows})
    best = None
    for t in sorted({s for _, s, _ in rows}):
        values = []
        for name in datasets:
            mine = [(s >= t, g) for d, s, g in rows if d == name]
            tp = sum(p and g for p, g in mine)
            fn = sum((not p) and g for p, g in mine)
            fp = sum(p and not g for p, g in mine)
            tn = sum((not p) and not g for p, g in mine)
            b = balanced_accuracy(tp, fn, fp, tn)["bacc"]
            if b is not None:
                values.append(b)
        if not values:
            continue
        score = math.fsum(values) / len(values)
        if best is None or score > best["bacc"] + 1e-12:
            best = {"threshold": t, "bacc": score}
    return best
