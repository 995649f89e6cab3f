"""A graded row's outcome: passed, failed, or not judged (the judge could not judge it).

The one rule (issue 44): a row whose grading hit a grader error (`graderError` on any of its
assertion results: a grader call that failed after its retries, a reply its step's schema does not
allow, a reply cut off) is an error, FAILURE_GRADING, unless its outcome does not depend on what the
judge would have said:
- it passed: an errored assertion scores 0, the least it could have scored, so it passes whatever the
  judge says;
- it failed on an assertion that was judged (no grader error), with nothing that could make up for it
  (no test threshold, no assert-set threshold, no scoring function): it fails whatever the judge says.
"""

from __future__ import annotations

from factcli.types import FAILURE_ASSERT, FAILURE_GRADING, FAILURE_NONE, GradingResult, TestCase


def grader_errored(result: GradingResult) -> bool:
    meta = result.metadata
    return bool(meta) and bool(meta.get("graderError"))


def has_grader_error(grading: GradingResult | None) -> bool:
    if grading is None:
        return False
    if grader_errored(grading):
        return True
    for c in grading.component_results:
        if grader_errored(c) or (c.component_results and has_grader_error(c)):
            return True
    return False


def _decided_without_judge(grading: GradingResult, test: TestCase) -> bool:
    """A failed row that fails whatever its errored assertions would have said."""
    if test.threshold is not None or test.raw.get("assertScoringFunction"):
        return False
    for a in test.assertions:
        if a.type == "assert-set" and a.threshold is not None:
            return False
    for c in grading.component_results:
        meta = c.metadata
        if c.passed or (meta and (meta.get("graderError") or "assertionSet" in meta)):
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
