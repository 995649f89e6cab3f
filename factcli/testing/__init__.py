"""Assertions for an application's own tests, and what factcli's pytest plugin (testing/plugin.py)
gives them: `assert_passes(output, assertions)`, the shortcuts `assert_factual(output, expected)` and
`assert_rubric(output, rubric)`, and `Checker`, a grader and a response cache bound together (the
`factcli_grader` fixture).

A failed assertion raises AssertionError whose message is the whole verdict: score, threshold, the
grader's reason for each failing assertion and, for claim-level types, the claims it did not find
supported. Importing this module costs nothing: factcli's machinery loads on the first check.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Checker", "assert_factual", "assert_passes", "assert_rubric"]

OUTPUT_SHOWN = 300  # characters of the output quoted in a failure message


def _failure(result, output: Any) -> str:
    text = output if isinstance(output, str) else repr(output)
    text = text if len(text) <= OUTPUT_SHOWN else text[: OUTPUT_SHOWN - 1] + "…"
    return f"factcli: the output {result.explain()}\noutput: {text}"


def assert_passes(output: Any, assertions: Any, *, vars: dict | None = None, grader: Any = None,
                  prompt: str | None = None, threshold: float | None = None, cache: bool = True,
                  cache_dir: Any = None):
    """Grade `output` with `assertions` (a dict, a list of dicts, or a Python function) as
    factcli.check() does; raise AssertionError with the verdict unless it passes. Returns the
    CheckResult."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this one
    from factcli.run.check import check

    result = check(output, assertions, vars=vars, grader=grader, prompt=prompt, threshold=threshold,
                   cache=cache, cache_dir=cache_dir)
    if not result.passed:
        raise AssertionError(_failure(result, output))
    return result


def assert_factual(output: Any, expected: str, *, method: str = "factual-correctness",
                   threshold: float | None = None, **options: Any):
    """The output states what `expected` states. `method`: factual-correctness (claim by claim, the
    default: a failure lists the claims not supported), factuality (promptfoo's one-verdict grader)
    or facts-grounding (`expected` is then the source document)."""
    __tracebackhide__ = True
    assertion: dict = {"type": method, "value": expected}
    if threshold is not None:
        assertion["threshold"] = threshold
    return assert_passes(output, assertion, **options)


def assert_rubric(output: Any, rubric: str, *, threshold: float | None = None, **options: Any):
    """The grader finds that the output meets `rubric` (llm-rubric)."""
    __tracebackhide__ = True
    assertion: dict = {"type": "llm-rubric", "value": rubric}
    if threshold is not None:
        assertion["threshold"] = threshold
    return assert_passes(output, assertion, **options)


class Checker:
    """A grader and a response-cache folder bound together: the same judge question asked twice,
    in this session or a later one, is answered from the cache."""

    def __init__(self, grader: Any = None, cache_dir: Any = None):
        self.grader = grader
        self.cache_dir = cache_dir

    def _options(self, options: dict) -> dict:
        options.setdefault("grader", self.grader)
        options.setdefault("cache_dir", self.cache_dir)
        return options

    def check(self, output: Any, assertions: Any, **options: Any):
        from factcli.run.check import check

        return check(output, assertions, **self._options(options))

    def assert_passes(self, output: Any, assertions: Any, **options: Any):
        __tracebackhide__ = True
        return assert_passes(output, assertions, **self._options(options))

    def assert_factual(self, output: Any, expected: str, **options: Any):
        __tracebackhide__ = True
        return assert_factual(output, expected, **self._options(options))

    def assert_rubric(self, output: Any, rubric: str, **options: Any):
        __tracebackhide__ = True
        return assert_rubric(output, rubric, **self._options(options))

    def __repr__(self) -> str:
        return f"<factcli Checker grader={self.grader!r} cache={self.cache_dir}>"
