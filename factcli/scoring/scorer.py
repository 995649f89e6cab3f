"""The one scoring runner: promptfoo's scoring rules (promptfoo-semantics.md §1-§3) in one place.

A test's assertions run here: the `not-` prefix, per-assertion `transform`, weights (including
weight 0), thresholds, templated metric names, assert-sets, the weighted aggregate with named
scores, and `assertScoringFunction`, which may replace the aggregate.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from factcli import templating
from factcli.scoring.gather import gather_all
from factcli.scoring.outcome import has_grader_error
from factcli.scoring.registry import (COMPARING, PASSED, AssertionContext, AssertionError_, coerce_string, lookup,
                                     worded)
from factcli.types import (EMPTY_DICT, EMPTY_LIST, ZERO_TOKENS, Assertion, GradingResult,
                           ProviderResponse, TestCase, TokenUsage, grading_json)


# One assertion's result as the aggregate counts it: (its place in the config's order, the result, its
# metric name rendered with the row's vars, its weight)
Part = tuple[int, GradingResult, "str | None", float]


def aggregate(parts: list[Part], threshold: float | None, assertion_set: Assertion | None = None) -> GradingResult:
    """promptfoo's AssertionsResult, the one aggregation of a row's assertions (and of an assert-set's
    members), whichever path scored them: a weighted mean with named scores, the reason of the last
    failure in the order `parts` come (the config's: never which judge answered first), and an
    optional threshold that decides pass and reason instead. The reason is that of the last failure that
    was judged, when one was (issue 52): a grading error beside it did not decide the row."""
    total_score = total_weight = 0.0
    failed_reason = judged_reason = None
    named: dict[str, float] = {}
    named_weights: dict[str, float] = {}
    tokens = TokenUsage()
    flat = True  # in the config's order, none with results of its own: the components are the results
    last = -1
    for index, result, metric, weight in parts:
        total_score += result.score * weight
        total_weight += weight
        if metric:
            named[metric] = named.get(metric, 0.0) + result.score * weight
            named_weights[metric] = named_weights.get(metric, 0.0) + weight
        if result.named_scores:
            for name, score in result.named_scores.items():
                if name != metric:
                    w = result.named_score_weights.get(name, 1.0) * weight
                    named[name] = named.get(name, 0.0) + score * w
                    named_weights[name] = named_weights.get(name, 0.0) + w
        if result.tokens_used is not ZERO_TOKENS:  # (a scored leaf's shared zero: nothing to add)
            tokens.add(result.tokens_used)
        if not result.passed:
            failed_reason = result.reason
            if not has_grader_error(result):
                judged_reason = result.reason
        if index < last or result.component_results:
            flat = False
        last = index
    score = total_score / total_weight if total_weight > 0 else 0.0
    passed = not failed_reason
    reason = judged_reason or failed_reason or "All assertions passed"
    if threshold is not None and not _isnan(threshold):
        passed = score >= threshold
        reason = (f"Aggregate score {templating.to_fixed(score)} {'≥' if passed else '<'} "
                  f"{_js_num(threshold)} threshold")
    if flat:
        components = [part[1] for part in parts]
    else:
        components = []
        for part in sorted(parts, key=_place):
            res = part[1]
            components.append(res)
            # then its direct children (an assert-set's members, a script's nested results), each under
            # its own assertion or else its parent's; grandchildren stay inside their parent (promptfoo)
            if res.component_results:
                components.extend(c if c.assertion is not None or res.assertion is None else
                                  dataclasses.replace(c, assertion=res.assertion) for c in res.component_results)
    if named:
        named = {k: (v / named_weights[k] if named_weights.get(k, 0) > 0 else 0.0) for k, v in named.items()}
    metadata = {}
    if assertion_set is not None:
        meta = {"type": "assert-set", "assertionCount": len(assertion_set.children or [])}
        for key in ("metric", "threshold", "weight"):
            if key in assertion_set.raw:
                meta[key] = assertion_set.raw[key]
        metadata["assertionSet"] = meta
    return GradingResult(passed, score, reason, None, named, named_weights, tokens, components, metadata)


def _place(part: Part) -> int:
    return part[0]


def _isnan(x: float) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _js_num(x: float) -> str:
    return templating.js_string(float(x)) if isinstance(x, (int, float)) else str(x)


def render_metric(metric: str | None, variables: dict) -> str | None:
    if not metric:
        return metric
    return templating.render(metric, variables)


def _rendered(value: Any) -> bool:
    """Whether _value renders `value` on each row: a string with a template, and any list or dict (a
    fresh copy per row, so that a value changed in place is seen as the general path sees it)."""
    return isinstance(value, (list, dict)) or (isinstance(value, str) and templating.has_template(value))


# What an assertion needs looked up once, not per row: its registered type, and whether its value is
# the same on every row (no template in it: rendering returns it as written). Keyed by the
# assertion (held, so its id is not reused) and checked against its type and value (either may be
# reassigned); bounded: cleared when full.
_PLANS: dict[int, tuple] = {}
_PLANS_MAX = 4096


def _plan(a: Assertion) -> tuple:
    """(assertion, its type, its value, registered type or None, value needs rendering?)"""
    hit = _PLANS.get(id(a))
    if hit is not None and hit[0] is a and hit[1] is a.type and hit[2] is a.value:
        return hit
    value = a.value
    kind = lookup(a.type)
    rendered = _rendered(value)
    plan = (a, a.type, value, kind, rendered)
    if kind is not None:  # an unknown type is refused on every row, as it is looked up on every row
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        _PLANS[id(a)] = plan
    return plan


def _value(a: Assertion, plan: tuple, variables: dict) -> Any:
    """The assertion's value rendered with the row's vars."""
    if not plan[4]:
        return a.value
    missing: list[str] = []
    value = templating.render_value(a.value, variables, missing=missing)
    # an undefined `<<name>>` stays as written, but an assertion compared with the placeholder's own
    # text is never what was meant: an error naming the var, as for a value that rendered empty
    kept = [n[2:-2] for n in missing if n.startswith("<<")]
    if kept or (missing and (value in ("", [], {}) or (isinstance(value, list) and all(v == "" for v in value)))):
        names = ", ".join(f"'{n}'" for n in dict.fromkeys(kept or missing))
        how = "names" if kept else "rendered empty: this test defines no var"
        raise AssertionError_(f"{a.type}: its value {a.value!r} {how}" + (f" {names}, which this test does not define"
                                                                         if kept else f" {names}"))
    return value


def _settle(a: Assertion, result: GradingResult, value: Any, variables: dict) -> GradingResult:
    """What every handler's result gets: its assertion, the rendered value, weight 0, calibration."""
    if result.assertion is None:
        result.assertion = a
    if isinstance(value, str) and value != a.value:
        result.metadata.setdefault("renderedAssertionValue", value)
    if a.weight == 0:
        if not result.passed:  # reports show its own verdict, marked as not counting
            result.metadata["weightZeroFailed"] = True
        result.passed = True
    if a.calibration is not None:  # counted per column by stats/judge.py, from the rows alone
        c = a.calibration
        result.metadata["judgeCalibration"] = {"key": render_metric(a.metric, variables) or a.base_type,
                                               "label": c["label"], **{k: c[k] for k in ("tp", "fn", "fp", "tn")}}
    return result


async def run_assertion(a: Assertion, *, output: Any, test: TestCase, variables: dict, prompt: str,
                        response: ProviderResponse, provider=None, grader=None) -> GradingResult:
    """Run one assertion; handler exceptions propagate and turn the row into ERROR."""
    plan = _plan(a)
    kind = plan[3]
    if kind is None:  # config validation rejects these earlier; this guards the Python API
        raise AssertionError_(f"Unknown assertion type: {a.type}")
    if a.transform:
        from factcli.scripting.transforms import apply_transform

        output = await apply_transform(a.transform, output, {"vars": variables, "prompt": {"label": prompt}})
    value = _value(a, plan, variables)
    ctx = AssertionContext(a, output, value, test, variables, prompt, response, provider, grader)
    if kind.is_async:
        if grader is None:
            result = await kind.handler(ctx)
        else:  # a grading that failed keeps none of the replies it read in the cache (run/calling/caller.py)
            with grader.given_replies() as given:
                result = await kind.handler(ctx)
            if given.keys and has_grader_error(result):
                given.drop()
    else:
        result = kind.handler(ctx)
    return _settle(a, result, value, variables)


def _run_sync(a: Assertion, plan: tuple, *, output: Any, test: TestCase, variables: dict, prompt: str,
              response: ProviderResponse, provider=None, grader=None) -> GradingResult:
    """run_assertion for a synchronous type without a transform, without a coroutine per assertion."""
    value = _value(a, plan, variables)
    return _settle(a, plan[3].handler(AssertionContext(a, output, value, test, variables, prompt, response,
                                                       provider, grader)), value, variables)


# An assertion made once into a prebound check (registry.check_assertion), when it is a deterministic
# binary type with no transform or calibration, outside an assert-set: every row of the tests sharing
# it (defaultTest's assertions are shared by every test) then runs its check with no lookup, context,
# coroutine or per-assertion aggregate. A value rendered per row (a template, a list or a dict) or one
# the type refuses is checked on each row by its handler, as _run_sync does; a metric name with a
# template is rendered on each row. Keyed by the
# assertion (held, so its id is not reused), checked on each use against the fields the check was
# made from (any may be reassigned); bounded as _PLANS is. One that cannot be prebound is remembered
# as such (its check None).
_BOUND: dict[int, tuple] = {}
_BOUND_MAX = 4096


def _prebind(a: Assertion) -> tuple | None:
    """(assertion, test, inverse, failure reason, weight, metric, metric has a template?, plan), or None
    for the general path. `plan` (_plan's) for a value rendered per row, whose test and reason are None."""
    if a.transform or a.calibration is not None or a.children is not None or a.base_type in COMPARING:
        return None
    kind = lookup(a.type)
    if kind is None or kind.check is None or kind.is_async:
        return None
    dynamic_metric = isinstance(a.metric, str) and templating.has_template(a.metric)
    rendered = _rendered(a.value)
    try:
        if rendered:
            raise LookupError
        test, reason = kind.check(a, a.value)
    except Exception:  # a value rendered per row, or one the type refuses: its handler on each row
        return (a, None, a.inverse, None, a.weight, a.metric, dynamic_metric, (a, a.type, a.value, kind, rendered))
    inverse = a.inverse
    if isinstance(reason, str):
        reason = worded(reason, inverse)
    return (a, test, inverse, reason, a.weight, a.metric, dynamic_metric, None)


def _bind(a: Assertion) -> tuple:
    """_BOUND's entry for `a`: the fields its check was made from, then the check (or None)."""
    if len(_BOUND) >= _BOUND_MAX:
        _BOUND.clear()
    entry = (a, a.type, a.value, a.weight, a.metric, a.transform, a.calibration, a.children, a.threshold, _prebind(a))
    _BOUND[id(a)] = entry
    return entry


def _checks(assertions: list) -> list | None:
    """The prebound checks of a list of assertions (see _BOUND), or None when one has none."""
    checks = []
    for a in assertions:
        hit = _BOUND.get(id(a))
        if (hit is None or a is not hit[0] or a.type is not hit[1] or a.value is not hit[2] or a.weight is not hit[3]
                or a.metric is not hit[4] or a.transform is not hit[5] or a.calibration is not hit[6]
                or a.children is not hit[7] or a.threshold is not hit[8]):
            hit = _bind(a)
        if hit[9] is None:
            return None
        checks.append(hit[9])
    return checks


def score_now(test: TestCase, output: Any, variables: dict, prompt: str, response: ProviderResponse,
              provider=None, grader=None, recorded: bool = False) -> GradingResult | None:
    """run_assertions' result, worked out without awaiting, for a test whose assertions are all prebound
    checks (see _BOUND) and that has no assertScoringFunction; None for any other test. Its results
    are aggregated as run_assertions aggregates them (`aggregate`), in the same order (a handler's error
    is raised where it would be). `recorded`: the
    result is an eval row's, which is recorded as it is: its prebound leaves' empty containers are
    the shared read-only ones the recorded row gets anyway (types.compact_row; nothing changes a leaf
    once scored), not four made a leaf for the collector to free or compact_row to swap.
    A grading handed to the caller (check(), run_assertions) keeps containers of its own."""
    assertions = test.assertions
    if not assertions:
        return None
    checks = _checks(assertions)
    if checks is None or test.raw.get("assertScoringFunction"):
        return None
    out = None  # the output's text, made where the first handler would make it
    parts: list[Part] = []
    for index, (a, check, inverse, reason, weight, metric, dynamic_metric, plan) in enumerate(checks):
        if plan is not None:
            result = _run_sync(a, plan, output=output, test=test, variables=variables, prompt=prompt,
                               response=response, provider=provider, grader=grader)
        else:
            if out is None:
                out = output if type(output) is str else coerce_string(output)
            if bool(check(out)) != inverse:
                result = GradingResult(True, 1.0, PASSED, a, EMPTY_DICT, EMPTY_DICT, ZERO_TOKENS,
                                       EMPTY_LIST, EMPTY_DICT) if recorded else GradingResult(True, 1.0, PASSED, a)
            else:
                if not isinstance(reason, str):
                    reason = worded(reason(out), inverse)
                # (a passed leaf is as _settle would leave it; a failed one of weight 0 gets metadata of its own)
                result = _settle(a, GradingResult(False, 0.0, reason, a, EMPTY_DICT, EMPTY_DICT, ZERO_TOKENS,
                                                  EMPTY_LIST, {} if weight == 0 else EMPTY_DICT) if recorded
                                 else GradingResult(False, 0.0, reason, a), a.value, variables)
        parts.append((index, result, render_metric(metric, variables) if dynamic_metric else metric, weight))
    return aggregate(parts, test.threshold)


async def run_assertions(test: TestCase, *, output: Any, variables: dict, prompt: str,
                         response: ProviderResponse, provider=None, grader=None,
                         scoring_function: str | None = None) -> GradingResult:
    """Aggregate a test's assertions exactly as promptfoo's runAssertions does.

    `scoring_function` (default: the test's `assertScoringFunction`, an absolute file:// reference)
    replaces the aggregate's pass, score and reason, as promptfoo's assertScoringFunction does."""
    if not test.assertions:
        return GradingResult(passed=True, score=1.0, reason="No assertions")
    if not scoring_function:
        result = score_now(test, output, variables, prompt, response, provider, grader)
        if result is not None:
            return result
    main: list[Part] = []
    sets: list[tuple[int, Assertion, list[Part]]] = []
    jobs: list[tuple[Assertion, list[Part], int, tuple]] = []
    concurrent = False
    for i, a in enumerate(test.assertions):
        if a.type == "assert-set":
            members: list[Part] = []
            sets.append((i, a, members))
            each = [(child, members, j) for j, child in enumerate(a.children or [])]
        else:
            each = [(a, main, i)]
        for child, parts, index in each:
            plan = _plan(child)
            concurrent = concurrent or bool(child.transform) or getattr(plan[3], "is_async", False)
            jobs.append((child, parts, index, plan))

    async def graded(a: Assertion) -> GradingResult | None:
        if a.base_type in COMPARING:
            return None  # run after all rows, across columns
        return await run_assertion(a, output=output, test=test, variables=variables, prompt=prompt,
                                   response=response, provider=provider, grader=grader)

    if not concurrent:  # all synchronous: no coroutine per assertion, no scheduling
        for a, parts, index, plan in jobs:
            if plan[3] is None or a.base_type in COMPARING:
                res = await graded(a)  # (an unknown type: run_assertion's error)
            else:
                res = _run_sync(a, plan, output=output, test=test, variables=variables, prompt=prompt,
                                response=response, provider=provider, grader=grader)
            if res is not None:
                parts.append((index, res, render_metric(a.metric, variables), a.weight))
    else:
        # every assertion at once: their calls wait for a place under the run's cap (-j, run/calling/caller.CallCap),
        # the one limit on calls in flight (promptfoo runs 3 assertions of a row at a time; a limit here
        # would only idle places -j leaves free). Added in the config's order, not as they finish: the
        # row's reason (its last failure) and the order of its named scores never depend on which judge
        # answered first
        for (a, parts, index, _), res in zip(jobs, await gather_all(graded(job[0]) for job in jobs)):
            if res is not None:
                parts.append((index, res, render_metric(a.metric, variables), a.weight))
    for index, s, members in sets:
        main.append((index, aggregate(members, s.threshold, s), render_metric(s.metric, variables), s.weight))
    result = aggregate(main, test.threshold)
    scoring_function = scoring_function or test.raw.get("assertScoringFunction")
    if scoring_function:
        result = await apply_scoring_function(scoring_function, result, test.threshold)
    return result


async def _call_scoring(spec: str, named: dict, context: dict) -> Any:
    from factcli.scripting.node import JSError, NodeWorkerError, get_worker, js_value
    from factcli.scripting.python import ScriptError, run_python_file
    from factcli.sources import PY_SUFFIXES, ref_path

    path, func = ref_path(spec, Path.cwd())
    if path.suffix.lower() in PY_SUFFIXES:
        try:
            return await run_python_file(path, func or "func", named, context)
        except ScriptError as exc:
            raise RuntimeError(str(exc)) from None
    try:
        answer = await get_worker().call("call", {"file": str(path), "fn": func, "args": [named, context],
                                                  "defaultName": "func"})
    except JSError as exc:
        raise RuntimeError(exc.js_message) from None
    except NodeWorkerError as exc:
        raise RuntimeError(str(exc)) from None
    return None if answer.get("undefined") else js_value(answer)


async def apply_scoring_function(spec: str, result: GradingResult, threshold: float | None) -> GradingResult:
    """promptfoo's assertScoringFunction: fn(namedScores, {threshold, componentResults, tokensUsed})
    returns the {pass, score, reason} that replaces the aggregate; a failure is pass false, score 0.
    User code is imported only for tests that have one, to keep the common run's start-up small."""
    from factcli.scripting.values import is_grading_result, numbers_of, plain, tokens_of

    context: dict[str, Any] = {}
    if threshold is not None:
        context["threshold"] = threshold
    context["componentResults"] = [grading_json(c) for c in result.component_results]
    context["tokensUsed"] = result.tokens_used.to_json()
    try:
        out = await _call_scoring(spec, plain(dict(result.named_scores)), plain(context))
        if not is_grading_result(out):
            raise RuntimeError("assertion scoring function must return a GradingResult")
    except Exception as exc:
        result.passed = False
        result.score = 0.0
        result.reason = f"Scoring function error: {exc}"
        return result
    result.passed = out["pass"]
    result.score = float(out["score"])
    result.reason = out["reason"]
    if isinstance(out.get("namedScores"), dict):
        result.named_scores = numbers_of(out["namedScores"])
    if isinstance(out.get("namedScoreWeights"), dict):
        result.named_score_weights = numbers_of(out["namedScoreWeights"])
    if isinstance(out.get("tokensUsed"), dict):
        result.tokens_used = tokens_of(out["tokensUsed"])
    if isinstance(out.get("metadata"), dict):
        result.metadata = {**out["metadata"], **result.metadata}  # the aggregate's own keys win
    return result
