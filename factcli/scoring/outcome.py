"""A graded row's outcome: passed, failed, or not judged (the judge could not judge it).

The one rule (issue 44): a row whose grading hit a grader error (`graderError` on any of its
assertion results: a grader call that failed after its retries, a reply its step's schema does not
allow, a reply cut off) is an error, FAILURE_GRADING, unless its outcome does not depend on what the
judge would have said:
- it passed: an errored assertion scores 0, the least it could have scored, so it passes whatever the
  judge says;
- it failed on an assertion that was judged (no grader error), with nothing that could make up for it
  (no test threshold, no assert-set threshold, no scoring function): it fails whatever the judge says.

An assertion's outcome follows the same rule one level down (issue 52): an assertion whose grading
errored was not judged, whatever its row's outcome. It never feeds a metric's mean or a gate
(`errored_metrics`), and `--retry-errors` re-runs every row that holds one (`needs_retry`), a row that
passed or failed on its other assertions included.
"""

from __future__ import annotations

from factcli.types import (ERROR_REASONS, FAILURE_ASSERT, FAILURE_GRADING, FAILURE_NONE, GradingResult, TestCase,
                           grader_error_mark, grader_errored, has_grader_error, json_errored, meta_errored)

# grader_errored (one assertion), meta_errored (its metadata, or a method's per-row record), json_errored (a
# stored result's JSON), grader_error_mark (the mark itself, to print) and has_grader_error (a grading, its
# assert-sets included) are written in factcli/types.py, beside `judged`, so that stats/ (below scoring/)
# reads the same rule; this module is where the rule is told and where every layer above takes them from.
__all__ = ["errored_metrics", "failure_of", "grader_error_mark", "grader_errored", "has_grader_error",
           "json_errored", "meta_errored", "needs_retry"]



def needs_retry(failure_reason, grading: GradingResult | None) -> bool:
    """Whether `--retry-errors` runs the row again: an ERROR row (a provider error, or not judged), or a
    row with any assertion whose grading errored, whatever its other assertions decided."""
    return failure_reason in ERROR_REASONS or has_grader_error(grading)


def errored_metrics(grading: GradingResult | None, metric_of) -> set:
    """The named metrics an errored assertion of this row feeds (`metric_of(assertion)`: its metric's
    name as rendered for the row): not judged on this row, so left out of their means and gates."""
    names: set = set()
    if grading is None:
        return names
    stack = list(grading.component_results)
    while stack:
        c = stack.pop()
        if grader_errored(c) or (c.component_results and has_grader_error(c)):  # an assert-set holding one too
            if c.assertion is not None and c.assertion.metric:
                names.add(metric_of(c.assertion.metric))
            names.update(c.named_scores)
            stack.extend(c.component_results)
    return names


def _decided_without_judge(grading: GradingResult, test: TestCase) -> bool:
    """A failed row that fails whatever its errored assertions would have said."""
    if test.threshold is not None or test.raw.get("assertScoringFunction"):
        return False
    for a in test.assertions:
        if a.type == "assert-set" and a.threshold is not None:
            return False
    for c in grading.component_results:
        if c.passed or grader_errored(c) or (c.metadata and "assertionSet" in c.metadata):
            continue
        return True
    return False


def failure_of(grading: GradingResult, test: TestCase) -> int:
    """FAILURE_NONE, FAILURE_ASSERT or FAILURE_GRADING for a row graded `grading`."""
    if grading.passed:
        return FAILURE_NONE
    if not has_grader_error(grading) or _decided_without_judge(grading, test):
        return FAILURE_ASSERT
    return FAILURE_GRADING
