"""Uncertainty of a run's numbers: 95% intervals and differences between runs (pure functions).

- Proportions (pass rates, and mean scores when every score is 0 or 1): the Wilson score interval,
  which never collapses to a point at 0% or 100% (6 of 6 is [61%, 100%], where the normal interval
  says ±0) and keeps close to 95% coverage on few rows. The normal (Wald) interval
  p ± 1.96·√(p(1−p)/N) stays for FACTS Grounding's own report, which is what its paper prints
  (Tables 5 and 6).
- The difference of two pass rates (or of two means of 0/1 scores): Newcombe's hybrid score
  interval, built from the two Wilson intervals, for rows that pair one to one (Newcombe 1998b,
  method 10, with the correlation of the pairs) or for two independent samples (Newcombe 1998a,
  method 10).
- Means of non-binary scores, and their differences between two runs: a seeded percentile bootstrap
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


# Below this many rows a pass rate is printed with a word that the sample is small: its interval is
# wide, whatever the method (at 20 rows a 50% rate is [30%, 70%]).
SMALL_SAMPLE = 30


def wilson_interval(successes: float, n: int) -> dict | None:
    """The Wilson score 95% interval of successes/n: {"value", "low", "high", "method", "n", "small"}.

    centre = (x + z²/2)/(n + z²), half-width = z/(n + z²)·√(x(n − x)/n + z²/4); never zero-width for
    n ≥ 1, and inside [0, 1] without clipping (bounds at exactly 0 or 1 are set so)."""
    if n <= 0:
        return None
    x = min(max(float(successes), 0.0), float(n))
    z2 = Z95 * Z95
    centre = (x + z2 / 2) / (n + z2)
    half = Z95 / (n + z2) * math.sqrt(x * (n - x) / n + z2 / 4)
    low = 0.0 if x == 0 else max(0.0, centre - half)
    high = 1.0 if x == n else min(1.0, centre + half)
    return {"value": x / n, "low": low, "high": high, "method": "wilson", "n": n, "small": n < SMALL_SAMPLE}


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


def _verdict(delta: float, low: float, high: float, method: str) -> dict:
    beyond = low > 0 or high < 0
    return {"delta": delta, "ci95": [low, high], "method": method, "beyondNoise": beyond,
            "verdict": "beyond noise" if beyond else "within noise"}


def newcombe_difference(passes_a: float, n_a: int, passes_b: float, n_b: int) -> dict | None:
    """95% interval of (rate of B) − (rate of A) for two independent samples: Newcombe's hybrid score
    interval (1998a, method 10), from each rate's Wilson interval (l, u):
    [d − √((p_B − l_B)² + (u_A − p_A)²), d + √((u_B − p_B)² + (p_A − l_A)²)]."""
    a, b = wilson_interval(passes_a, n_a), wilson_interval(passes_b, n_b)
    if a is None or b is None:
        return None
    pa, pb = a["value"], b["value"]
    d = pb - pa
    low = d - math.sqrt((pb - b["low"]) ** 2 + (a["high"] - pa) ** 2)
    high = d + math.sqrt((b["high"] - pb) ** 2 + (pa - a["low"]) ** 2)
    return _verdict(d, max(-1.0, low), min(1.0, high), "newcombe")


def paired_correlation(e: int, f: int, g: int, h: int) -> float:
    """Newcombe's (1998b) estimate of the correlation of the two paired rates, for the cells e (both
    pass), f (A only), g (B only), h (neither) of n = e+f+g+h pairs: φ = (eh − fg)/√(margins product),
    the margins being (e+f)(g+h)(e+g)(f+h). When eh > fg it is continuity-corrected to
    φ* = max(eh − fg − n/2, 0)/√(…): the uncorrected φ makes the interval too narrow when the runs
    agree (53 of 54 rows passing in both: ±0.064 where the paper's method 10 gives ±0.0729). 0 when a
    margin is empty (one rate at 0 or 1: there is nothing to correlate)."""
    margins = (e + f) * (g + h) * (e + g) * (f + h)
    if not margins:
        return 0.0
    n = e + f + g + h
    cross = e * h - f * g
    if cross > 0:
        cross = max(cross - n / 2, 0.0)
    return cross / math.sqrt(margins)


def newcombe_paired(pairs: Sequence[tuple[float, float]]) -> dict | None:
    """95% interval of (rate of B) − (rate of A) over rows that pair one to one, each (A passed, B
    passed) as 0/1: Newcombe's hybrid score interval for paired proportions (1998b, method 10). With
    the 2×2 counts e (both pass), f (A only), g (B only), h (neither), the Wilson intervals of both
    rates and the corrected correlation φ of `paired_correlation`:
    [d − √(dl_B² − 2φ·dl_B·du_A + du_A²), d + √(du_B² − 2φ·du_B·dl_A + dl_A²)], where dl = p − l and
    du = u − p."""
    n = len(pairs)
    if n == 0:
        return None
    e = sum(1 for x, y in pairs if x and y)
    f = sum(1 for x, y in pairs if x and not y)
    g = sum(1 for x, y in pairs if y and not x)
    h = n - e - f - g
    a, b = wilson_interval(e + f, n), wilson_interval(e + g, n)
    pa, pb = a["value"], b["value"]
    phi = paired_correlation(e, f, g, h)
    dl_a, du_a = pa - a["low"], a["high"] - pa
    dl_b, du_b = pb - b["low"], b["high"] - pb
    d = pb - pa
    low = d - math.sqrt(max(0.0, dl_b ** 2 - 2 * phi * dl_b * du_a + du_a ** 2))
    high = d + math.sqrt(max(0.0, du_b ** 2 - 2 * phi * du_b * dl_a + dl_a ** 2))
    return _verdict(d, max(-1.0, low), min(1.0, high), "newcombe paired")


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
    return _verdict(delta, low, high, method)
