"""Uncertainty of a run's numbers: 95% intervals and differences between runs (pure functions).

- Proportions (pass rates, and mean scores when every score is 0 or 1): the normal (Wald) interval
  p ± 1.96·√(p(1−p)/N), which is what the FACTS Grounding paper reports (its Tables 5 and 6).
- Means of non-binary scores, and differences between two runs: a seeded percentile bootstrap
  (2000 resamples). Tests are resampled with all their rows (their repeats stay together), so
  repeats of one test are not counted as independent evidence.
- With repeats: see passk.py.

numpy is imported only inside the functions that resample, so importing this module stays cheap.
"""

from __future__ import annotations

import math
from typing import Sequence

Z95 = 1.96
RESAMPLES = 2000
# Fixed so that the same rows always print the same interval (a CI that changes between two
# `factcli view` calls of one run would look like a bug).
SEED = 20211207
# Up to this many distinct (sum, count) clusters the bootstrap draws multinomial counts per
# distinct value, which is the same distribution as resampling rows and costs O(K) per resample
# instead of O(N); binary and few-valued scores (the common case) always take this path.
_MULTINOMIAL_MAX_DISTINCT = 64
_CHUNK = 4_000_000  # index draws per block when resampling rows directly, to bound memory


# ---------------------------------------------------------------- proportions


def wald_margin(p: float, n: int) -> float:
    """Half-width of the normal 95% interval, 1.96·√(p(1−p)/N) (FACTS Grounding, Tables 5 and 6)."""
    if n <= 0:
        return math.nan
    return Z95 * math.sqrt(max(p * (1 - p), 0.0) / n)


def wald_interval(successes: float, n: int) -> dict | None:
    """{"value", "low", "high", "margin", "method"}; the bounds are clipped to [0, 1]."""
    if n <= 0:
        return None
    p = successes / n
    margin = wald_margin(p, n)
    return {"value": p, "low": max(0.0, p - margin), "high": min(1.0, p + margin), "margin": margin,
            "method": "wald"}


# ---------------------------------------------------------------- bootstrap


def _rng(seed: int | None):
    import numpy as np

    return np.random.default_rng(SEED if seed is None else seed)


def resample_ratio(sums: Sequence[float], counts: Sequence[float], resamples: int = RESAMPLES, rng=None):
    """`resamples` bootstrap replicates of Σsums/Σcounts, drawing clusters (sum, count) with
    replacement; an empty numpy array when there is nothing to draw."""
    import numpy as np

    s = np.asarray(sums, dtype=float)
    c = np.asarray(counts, dtype=float)
    keep = c > 0
    s, c = s[keep], c[keep]
    n = len(s)
    if n == 0:
        return np.empty(0)
    rng = rng if rng is not None else _rng(None)
    # sorted, so the result does not depend on the order the rows finished in
    order = np.lexsort((c, s))
    s, c = s[order], c[order]
    starts = np.flatnonzero(np.concatenate([[True], (s[1:] != s[:-1]) | (c[1:] != c[:-1])]))
    if len(starts) <= _MULTINOMIAL_MAX_DISTINCT:
        freq = np.diff(np.append(starts, n))
        w = rng.multinomial(n, freq / n, size=resamples)
        return (w @ s[starts]) / (w @ c[starts])
    same_count = bool((c == c[0]).all())  # no repeats: the denominator is a constant
    out = np.empty(resamples)
    step = max(1, _CHUNK // n)
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        idx = rng.integers(0, n, size=(stop - start, n), dtype=np.int32 if n < 2**31 else np.int64)
        out[start:stop] = s[idx].sum(axis=1) / (c[0] * n if same_count else c[idx].sum(axis=1))
    return out


def percentile_interval(replicates, value: float, level: float = 0.95) -> dict | None:
    import numpy as np

    if len(replicates) == 0:
        return None
    tail = (1 - level) / 2
    low, high = np.quantile(replicates, [tail, 1 - tail])
    return {"value": value, "low": float(low), "high": float(high), "method": "bootstrap",
            "resamples": int(len(replicates))}


def bootstrap_mean(values: Sequence[float], resamples: int = RESAMPLES, seed: int | None = None) -> dict | None:
    """Percentile bootstrap 95% interval of the mean of `values` (seeded, reproducible)."""
    values = [float(v) for v in values]
    if not values:
        return None
    reps = resample_ratio(values, [1.0] * len(values), resamples, _rng(seed))
    return percentile_interval(reps, math.fsum(values) / len(values))


def bootstrap_cluster_mean(sums: Sequence[float], counts: Sequence[float], resamples: int = RESAMPLES,
                           seed: int | None = None) -> dict | None:
    """Interval of Σsums/Σcounts resampling whole clusters (a test with its repeats)."""
    total = math.fsum(counts)
    if total <= 0:
        return None
    reps = resample_ratio(sums, counts, resamples, _rng(seed))
    return percentile_interval(reps, math.fsum(sums) / total)


# ---------------------------------------------------------------- two runs


def difference(a: dict[str, list[tuple[float, float]]] | None, b: dict[str, list[tuple[float, float]]] | None,
               *, paired: dict[str, list[tuple[float, float]]] | None = None,
               resamples: int = RESAMPLES, seed: int | None = None) -> dict | None:
    """95% bootstrap interval of (mean of B) − (mean of A).

    `paired`: test key -> [(value in A, value in B), ...] for runs that hold the same tests; tests
    are resampled with their pairs, so the noise shared by both runs (hard and easy tests) cancels.
    Otherwise `a` and `b` (test key -> values) are resampled independently of each other.
    "beyondNoise" is true when the interval leaves out 0.
    """
    import numpy as np

    rng = _rng(seed)
    if paired is not None:
        sums = [math.fsum(y - x for x, y in pairs) for pairs in paired.values() if pairs]
        counts = [len(pairs) for pairs in paired.values() if pairs]
        if not counts:
            return None
        delta = math.fsum(sums) / sum(counts)
        reps = resample_ratio(sums, counts, resamples, rng)
        method = "paired bootstrap"
    else:
        def clusters(side):
            items = [v for v in (side or {}).values() if v]
            return [math.fsum(v) for v in items], [len(v) for v in items]

        sa, ca = clusters(a)
        sb, cb = clusters(b)
        if not ca or not cb:
            return None
        delta = math.fsum(sb) / sum(cb) - math.fsum(sa) / sum(ca)
        reps = resample_ratio(sb, cb, resamples, rng) - resample_ratio(sa, ca, resamples, rng)
        method = "bootstrap"
    low, high = (float(x) for x in np.quantile(reps, [0.025, 0.975]))
    beyond = low > 0 or high < 0
    return {"delta": delta, "ci95": [low, high], "method": method, "beyondNoise": beyond,
            "verdict": "beyond noise" if beyond else "within noise"}
