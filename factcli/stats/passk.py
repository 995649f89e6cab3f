"""Repeat statistics: pass@k (Chen et al. 2021, unbiased estimator 1 − C(n−c,k)/C(n,k)), pass^k
(τ-bench, C(c,k)/C(n,k)) and the flip rate (share of tests whose repeats disagree)."""

from __future__ import annotations

import math
from typing import Iterable


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. 2021: the chance that at least one of k of the n samples passes, 1 − C(n−c,k)/C(n,k)."""
    if not 0 < k <= n:
        raise ValueError(f"pass@k needs 0 < k <= n (k={k}, n={n})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """τ-bench's pass^k: the chance that all of k of the n samples pass, C(c,k)/C(n,k)."""
    if not 0 < k <= n:
        raise ValueError(f"pass^k needs 0 < k <= n (k={k}, n={n})")
    return math.comb(c, k) / math.comb(n, k)


def repeat_stats(clusters: Iterable[tuple[int, int]], repeat: int) -> dict | None:
    """pass@k and pass^k for k = 1..repeat, averaged over the tests that have at least k rows, and
    the flip rate over the tests that have at least two: clusters are (rows, passes) per test."""
    clusters = [(n, c) for n, c in clusters if n > 0]
    if repeat < 2 or not clusters:
        return None
    at, hat = {}, {}
    for k in range(1, repeat + 1):
        eligible = [(n, c) for n, c in clusters if n >= k]
        if eligible:
            at[str(k)] = sum(pass_at_k(n, c, k) for n, c in eligible) / len(eligible)
            hat[str(k)] = sum(pass_hat_k(n, c, k) for n, c in eligible) / len(eligible)
    repeated = [(n, c) for n, c in clusters if n >= 2]
    flaky = sum(1 for n, c in repeated if 0 < c < n)
    return {"repeat": repeat, "passAtK": at, "passHatK": hat,
            "flipRate": (flaky / len(repeated)) if repeated else None,
            "flakyTests": flaky, "repeatedTests": len(repeated)}
