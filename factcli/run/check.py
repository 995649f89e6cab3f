"""`factcli.check(output, assertions, ...)`: grade one output with any registered assertion, from
application code or a test, synchronously (also inside a running event loop).

The assertions are read as a test's `assert:` list is read from a config (same checks, same
messages), scored by the one scoring runner, with model-graded ones sent to the grader through a
Caller, so they get the response cache and the retries of a run. `explain` words a result for a
failed test: score, threshold, each failing assertion's reason and the claims it did not support.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factcli.errors import FactcliError
from factcli.types import GradingResult, ProviderResponse, grading_json


class CheckResult:
    """What check() returns: truthy when the output passed."""

    def __init__(self, grading: GradingResult, threshold: float | None = None):
        self.grading = grading
        self.threshold = threshold

    passed = property(lambda self: self.grading.passed)
    score = property(lambda self: self.grading.score)
    reason = property(lambda self: self.grading.reason)
    components = property(lambda self: list(self.grading.component_results))
    named_scores = property(lambda self: dict(self.grading.named_scores))

    @property
    def failing_claims(self) -> list[dict]:
        """The claims (or atomic facts) a claim-level assertion did not find supported."""
        return [c for g in self.grading.component_results for c in _claims(g) if not _supported(c)]

    def to_dict(self) -> dict:
        """The gradingResult of the results JSON."""
        return grading_json(self.grading, top=True)

    def explain(self) -> str:
        return explain(self.grading, self.threshold)

    def __bool__(self) -> bool:
        return bool(self.grading.passed)

    def __repr__(self) -> str:
        return (f"<CheckResult {'PASS' if self.passed else 'FAIL'} score {self.score:.2f}: "
                f"{_short(self.reason, 100)}>")


def _short(text: Any, n: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _claims(g: GradingResult) -> list[dict]:
    from factcli.report.rows import claim_irrelevant

    meta = g.metadata or {}
    # safe's irrelevant facts were never judged: neither supported nor not
    return [c for key in ("claims", "facts") if isinstance(meta.get(key), list) for c in meta[key]
            if isinstance(c, dict) and not claim_irrelevant(c)]


def _supported(item: dict) -> bool:
    from factcli.report.rows import claim_supported

    return claim_supported(item)


def _threshold_of(g: GradingResult) -> Any:
    a = g.assertion
    if a is not None and a.threshold is not None:
        return a.threshold
    return (g.metadata or {}).get("threshold")


def explain(grading: GradingResult, threshold: float | None = None) -> str:
    """Several lines: the verdict with score and threshold, then each failing assertion with its
    score, threshold and the grader's reason, and the claims it did not find supported (labelled as
    `show` labels them)."""
    from factcli.report.rows import claim_side

    head = f"{'passed' if grading.passed else 'failed'}: score {grading.score:.2f}"
    if threshold is not None:
        head += f" (threshold {threshold:g})"
    lines = [head]
    failing = [g for g in grading.component_results if not g.passed] or ([] if grading.passed else [grading])
    for g in failing:
        kind = g.assertion.type if g.assertion is not None else "assertions"
        bits = [f"score {g.score:.2f}"]
        t = _threshold_of(g)
        if t is not None:
            bits.append(f"threshold {t:g}" if isinstance(t, (int, float)) else f"threshold {t}")
        lines.append(f"- {kind} failed ({', '.join(bits)}): {g.reason}")
        bad = [c for c in _claims(g) if not _supported(c)]
        if bad:
            lines.append(f"  claims not supported ({len(bad)} of {len(_claims(g))}):")
            for c in bad:
                text = c.get("text") or c.get("claim") or c.get("fact") or ""
                verdict = c.get("verdict") or "not supported"
                side = f" ({claim_side(c)})" if claim_side(c) else ""
                why = f": {_short(c['reason'], 160)}" if c.get("reason") else ""
                lines.append(f"    [{verdict}] {text}{side}{why}")
    return "\n".join(lines)


# ---------------------------------------------------------------- check()


def _assert_list(assertions: Any) -> list:
    if isinstance(assertions, dict) or callable(assertions):
        return [assertions]
    if isinstance(assertions, (list, tuple)) and assertions:
        return list(assertions)
    raise FactcliError("check(): assertions must be an assertion dict ({'type': ..., 'value': ...}), a list "
                       f"of them or a Python function, got {type(assertions).__name__}")


def _prepare(assertions: Any, vars: dict | None, grader: Any, prompt: str | None, threshold: float | None):
    from factcli.config.loader import build_suite
    from factcli.run.planning import preflight
    from factcli.run import runner
    from factcli.run.api import _grader_id, with_functions

    test: dict = {"vars": dict(vars or {}), "assert": _assert_list(assertions)}
    if threshold is not None:
        test["threshold"] = threshold
    cfg = with_functions({"prompts": ["check"], "providers": ["echo"], "tests": [test]})  # the prompt is never rendered
    suite = build_suite(cfg, Path("check()"), None)
    run = runner.prepare(suite, runner.RunOptions(grader=_grader_id(grader)))
    preflight.check(run, [], {})
    return suite, run


async def check_async(output: Any, assertions: Any, vars: dict | None = None, grader: Any = None,
                      prompt: str | None = None, *, threshold: float | None = None, cache: bool = True,
                      cache_dir: str | Path | None = None) -> CheckResult:
    """check() for code in an event loop."""
    from factcli.run.calling.cache import ResponseCache
    from factcli.run.calling.caller import Caller, RetryPolicy
    from factcli.run.calling.limits import Limiters
    from factcli.scoring.grading import Grader, grader_ledger, note_grader_spend
    from factcli.scoring.registry import AssertionError_
    from factcli.scoring.scorer import run_assertions

    suite, run = _prepare(assertions, vars, grader, prompt, threshold)
    step = run.steps.first()
    caller = Caller(ResponseCache(Path(cache_dir) if cache_dir else None) if cache else None,
                    RetryPolicy.from_env(), Limiters(run.concurrency), cap=run.concurrency)  # an eval's -j default
    try:
        with grader_ledger() as spent:
            result = await run_assertions(step.test, output=output, variables=step.vars, prompt=prompt or "",
                                          response=ProviderResponse(output=output),
                                          grader=Grader(caller, suite.base_dir, run.grader_source))
        note_grader_spend(result, spent)
    except AssertionError_ as exc:  # the message an eval row's ERROR would give, as the error check() raises
        message = str(exc)
        if message.endswith("must have a prompt"):
            message += " (the question the output answers): check(output, assertions, prompt='...')"
        raise FactcliError(f"check(): {message}") from None
    finally:
        if caller.cache is not None:
            caller.cache.close()
        import sys

        if "factcli.providers.openai_provider" in sys.modules:  # its HTTP sessions belong to this loop
            from factcli.providers.openai_provider import aclose_all

            await aclose_all()
    return CheckResult(result, threshold)


def check(output: Any, assertions: Any, vars: dict | None = None, grader: Any = None, prompt: str | None = None,
          **options: Any) -> CheckResult:
    """Grade `output`; see docs/python-api.md. Options: threshold, cache (default True), cache_dir."""
    from factcli.run.api import run_sync

    unknown = set(options) - {"threshold", "cache", "cache_dir"}
    if unknown:
        from factcli.errors import did_you_mean

        name = min(unknown)
        raise FactcliError(f"check(): unknown option '{name}'{did_you_mean(name, ['threshold', 'cache', 'cache_dir'])}")
    return run_sync(lambda: check_async(output, assertions, vars, grader, prompt, **options))
