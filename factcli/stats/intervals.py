"""Uncertainty of a run's numbers: 95% intervals, differences between runs, repeat statistics.

- Proportions (pass rates, and mean scores when every score is 0 or 1): the normal (Wald) interval
  p ± 1.96·√(p(1−p)/N), which is what the FACTS Grounding paper reports (its Tables 5 and 6).
- Means of non-binary scores, and differences between two runs: a seeded percentile bootstrap
  (2000 resamples). Tests are resampled with all their rows (their repeats stay together), so
  repeats of one test are not counted as independent evidence.
- With repeats: pass@k (Chen et al. 2021, unbiased estimator 1 − C(n−c,k)/C(n,k)), pass^k
  (τ-bench, C(c,k)/C(n,k)) and the flip rate (share of tests whose repeats disagree).

numpy is imported only inside the functions that resample, so importing this module stays cheap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

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


@dataclass
class Cluster:
    """One test within a column: its rows (repeats), passes and scores."""

    rows: int = 0
    passes: int = 0
    score_sum: float = 0.0
    scored: int = 0  # rows with a finite score
    nonbinary: bool = False  # some score is neither 0 nor 1

    def add(self, success: bool, score: Any) -> None:
        self.rows += 1
        self.passes += bool(success)
        if _finite(score):
            self.score_sum += score
            self.scored += 1
            if score not in (0, 1):
                self.nonbinary = True


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


# ---------------------------------------------------------------- repeats


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


# ---------------------------------------------------------------- a column


def _finite(score: Any) -> bool:
    return isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score)


def _summarize(rows: int, passes: int, sums: list[float], counts: list[int], nonbinary: bool,
               tests: Iterable[tuple[int, int]], repeat: int) -> dict:
    """What factcli reports for one column (stored under ColumnMetrics.stats and written to
    `factcli.columns[i]` of the results JSON). `sums`/`counts`: score sum and scored rows per test;
    `tests`: (rows, passes) per test, read only with repeats."""
    out: dict = {"n": rows, "passes": passes}
    rate = wald_interval(passes, rows)
    out["passRate"] = rate["value"] if rate else None
    out["passRateCi95"] = [rate["low"], rate["high"]] if rate else None
    out["passRateMargin"] = rate["margin"] if rate else None
    n_scored = sum(counts)
    score = None
    if n_scored:
        if not nonbinary:  # the mean of 0/1 scores is a proportion: same interval as the pass rate
            score = wald_interval(math.fsum(sums), n_scored)
        else:
            score = bootstrap_cluster_mean(sums, counts)
    out["scoreMean"] = score["value"] if score else None
    out["scoreN"] = n_scored
    out["scoreBinary"] = (not nonbinary) if n_scored else None
    out["scoreCi95"] = [score["low"], score["high"]] if score else None
    out["scoreCi95Method"] = score["method"] if score else None
    reps = repeat_stats(tests, repeat) if repeat > 1 else None
    if reps:
        out.update(reps)
    return out


def column_stats(clusters: Iterable[Cluster], repeat: int = 1) -> dict:
    """A column's statistics from its tests (each with all its repeats)."""
    clusters = list(clusters)
    scored = [c for c in clusters if c.scored]
    return _summarize(sum(c.rows for c in clusters), sum(c.passes for c in clusters),
                      [c.score_sum for c in scored], [c.scored for c in scored],
                      any(c.nonbinary for c in scored), [(c.rows, c.passes) for c in clusters], repeat)


def row_stats(rows: int, passes: int, scores: Sequence[float]) -> dict:
    """A column's statistics when every row is its own test (no repeats); `scores` are the finite
    ones. Cheaper than building a Cluster per row on a large run."""
    nonbinary = any(x != 0 and x != 1 for x in scores)
    return _summarize(rows, passes, scores, [1] * len(scores), nonbinary, (), 1)


class ColumnSample:
    """A column's final rows reduced to what its statistics need, so that a run can count a row and
    let it go: the counts and finite scores, or with repeats one Cluster per test."""

    __slots__ = ("repeat", "rows", "passes", "scores", "clusters")

    def __init__(self, repeat: int = 1):
        from array import array

        self.repeat = repeat
        self.rows = self.passes = 0
        self.scores = array("d")
        self.clusters: dict[str, Cluster] = {}

    def add(self, row) -> None:
        if self.repeat > 1:
            from factcli.types import test_key

            # a test's repeats share the store's test key, so `view` groups them alike
            key = test_key(row.step.test.description, row.step.vars)
            self.clusters.setdefault(key, Cluster()).add(row.success, row.score)
            return
        self.rows += 1
        self.passes += bool(row.success)
        if _finite(row.score):
            self.scores.append(row.score)

    def stats(self) -> dict:
        if self.repeat > 1:
            return column_stats(self.clusters.values(), self.repeat)
        return row_stats(self.rows, self.passes, self.scores)


def fill(run) -> None:
    """Compute the stats of `run`'s columns (an EvalRun's, from its rows) where they are missing; a
    run that executed here has them already (EvalRun.finalize)."""
    todo = {i: ColumnSample(getattr(run, "repeat", 1) or 1)
            for i, m in enumerate(run.metrics) if not getattr(m, "stats", None)}
    if not todo:
        return
    for r in run.all_rows():
        sample = todo.get(r.step.prompt_idx)
        if sample is not None:
            sample.add(r)
    for i, sample in todo.items():
        run.metrics[i].stats = sample.stats()


def run_interval(run) -> list[float] | None:
    """The normal interval of the whole run's pass rate (every column's rows together)."""
    rate = wald_interval(run.successes, run.successes + run.failures + run.errors)
    return [rate["low"], rate["high"]] if rate else None


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


# ---------------------------------------------------------------- text


def fmt_rate(value: float | None, margin: float | None) -> str:
    """A proportion as the FACTS paper prints it: `91.4% ± 1.9` (points)."""
    if value is None:
        return "n/a"
    if margin is None or math.isnan(margin):
        return f"{value * 100:.1f}%"
    return f"{value * 100:.1f}% ± {margin * 100:.1f}"


def fmt_interval(ci: Sequence[float] | None, digits: int = 3) -> str:
    if not ci:
        return ""
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def repeat_cells(st: dict, k: int) -> list[str]:
    """pass@k, pass^k and the flip rate of one column, as table cells."""
    at, hat = (st.get("passAtK") or {}).get(str(k)), (st.get("passHatK") or {}).get(str(k))
    flip = st.get("flipRate")
    return ["—" if at is None else f"{at * 100:.1f}%", "—" if hat is None else f"{hat * 100:.1f}%",
            "—" if flip is None else f"{flip * 100:.1f}% ({st.get('flakyTests', 0)}/{st.get('repeatedTests', 0)})"]


def legend(nonbinary: bool, repeat: int) -> str:
    """One line under a table saying what its intervals and repeat columns are."""
    parts = ["95% intervals: pass rate ± 1.96·√(p(1−p)/N)"]
    if nonbinary:
        parts.append(f"score [percentile bootstrap, {RESAMPLES} resamples over tests]")
    if repeat > 1:
        parts.append(f"pass@{repeat}: some of {repeat} repeats pass, pass^{repeat}: all pass, "
                     "flip rate: tests whose repeats disagree")
    return "; ".join(parts)
