"""A column's statistics, counted row by row as rows finish (ColumnSample) and summarised once:
pass rate with its Wilson interval, the mean score with a bootstrap interval over tests, and the
repeat statistics when tests were repeated."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from factcli.stats.intervals import bootstrap_cluster_mean, wilson_interval
from factcli.stats.judge import JudgeTally
from factcli.stats.passk import repeat_stats
from factcli.types import FAILURE_GRADING, has_grader_error


def _finite(score: Any) -> bool:
    return isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score)


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


def _summarize(rows: int, passes: int, sums: list[float], counts: list[int], nonbinary: bool,
               tests: Iterable[tuple[int, int]], repeat: int) -> dict:
    """What factcli reports for one column (stored under ColumnMetrics.stats and written to
    `factcli.columns[i]` of the results JSON). `sums`/`counts`: score sum and scored rows per test;
    `tests`: (rows, passes) per test, read only with repeats."""
    out: dict = {"n": rows, "passes": passes}
    rate = wilson_interval(passes, rows)
    out["passRate"] = rate["value"] if rate else None
    out["passRateCi95"] = [rate["low"], rate["high"]] if rate else None
    out["passRateCi95Method"] = "wilson"
    n_scored = sum(counts)
    score = None
    if n_scored:
        if not nonbinary:  # the mean of 0/1 scores is a proportion: same interval as the pass rate
            score = wilson_interval(math.fsum(sums), n_scored)
        elif len(counts) > 1:
            score = bootstrap_cluster_mean(sums, counts)
        else:  # one test: nothing to resample, and a zero-width interval would claim certainty
            score = {"value": math.fsum(sums) / n_scored, "low": None, "high": None, "method": None}
    out["scoreMean"] = score["value"] if score else None
    out["scoreN"] = n_scored
    out["scoreBinary"] = (not nonbinary) if n_scored else None
    out["scoreCi95"] = [score["low"], score["high"]] if score and score["low"] is not None else None
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
        if row.failure_reason == FAILURE_GRADING:  # not judged: out of the pass rate and the score
            return
        # a row with an assertion not judged (decided by the others) counts in the pass rate; its score,
        # a weighted mean over its assertions, is unknown: out of the score's mean
        score = None if has_grader_error(row.grading) else row.score
        if self.repeat > 1:
            from factcli.types import test_key

            # a test's repeats share the store's test key, so `view` groups them alike
            key = test_key(row.step.test.description, row.step.vars)
            self.clusters.setdefault(key, Cluster()).add(row.success, score)
            return
        self.rows += 1
        self.passes += bool(row.success)
        if _finite(score):
            self.scores.append(score)

    def stats(self) -> dict:
        if self.repeat > 1:
            return column_stats(self.clusters.values(), self.repeat)
        return row_stats(self.rows, self.passes, self.scores)


def fill(run) -> None:
    """Compute the stats of `run`'s columns (an EvalRun's, from its rows) where they are missing; a
    run that executed here has them already (EvalRun.finalize)."""
    todo = {i: (ColumnSample(getattr(run, "repeat", 1) or 1), JudgeTally())
            for i, m in enumerate(run.metrics) if not getattr(m, "stats", None)}
    if not todo:
        return
    for r in run.all_rows():
        for tally in todo.get(r.step.prompt_idx, ()):
            tally.add(r)
    for i, (sample, judged) in todo.items():
        run.metrics[i].stats = sample.stats()
        run.metrics[i].judge_corrected = judged.reports()


def run_interval(run) -> list[float] | None:
    """The Wilson interval of the whole run's pass rate (every column's rows judged together)."""
    rate = wilson_interval(run.successes, run.judged)
    return [rate["low"], rate["high"]] if rate else None
