"""Assertions that compare the columns of a test after every row has run: select-best, max-score.

They follow promptfoo 0.121.20: the comparison's result is appended to each row's component
results, a row that loses fails (taking the comparison's score and reason), and the column
metrics are corrected for what changed.
"""

from __future__ import annotations

import json
import math

from factcli import templating
from factcli.scoring.grading import (
    as_template_text,
    grader_error,
    grader_ledger,
    parse_json_maybe,
    render_grading_prompt,
)
from factcli.scoring.outcome import grader_errored
from factcli.scoring.registry import COMPARING, compares
from factcli.types import FAILURE_ASSERT, FAILURE_GRADING, EvalResult, GradingResult


def _find(result: EvalResult, kind: str):
    for a in result.step.test.assertions:
        if a.type == kind:
            return a
    return None


async def run_comparisons(run, grader) -> None:
    by_test: dict[int, list[EvalResult]] = {}
    for r in run.rows:  # a stored run holds these rows in memory too (EvalRun.keep)
        if compares(r.step.test):
            by_test.setdefault(r.step.test_idx, []).append(r)
    for test_idx in sorted(by_test):
        rows = sorted(by_test[test_idx], key=lambda r: r.step.prompt_idx)
        select = _find(rows[0], "select-best")
        if select is not None and len(rows) >= 2:
            with grader_ledger() as spent:
                results = await select_best(select, rows, grader)
            # one grader call judged all the columns: its cost is counted once, on the first
            results[0].metadata = {**results[0].metadata, "graderCost": spent.total_cost, "graderCalls": spent.calls}
            for row, res in zip(rows, results):
                _apply_select_best(run, row, res)
        maxs = _find(rows[0], "max-score")
        if maxs is not None and len(rows) >= 2:
            for row, res in zip(rows, max_score(maxs, rows)):
                _apply_max_score(run, row, res)


async def select_best(assertion, rows: list[EvalResult], grader) -> list[GradingResult]:
    from factcli.assertions import prompts

    test = rows[0].step.test
    criteria = templating.render_value(assertion.value, rows[0].step.vars)
    outputs = [as_template_text(parse_json_maybe(_text(r))) for r in rows]
    spec = grader.spec_for(assertion, test)
    template = assertion.rubric_prompt or test.options.get("rubricPrompt") or prompts.SELECT_BEST
    messages = render_grading_prompt(template, {**rows[0].step.vars, "criteria": criteria, "outputs": outputs})
    with grader.given_replies() as given:  # a verdict it could not read leaves the cache (run/calling/caller.py)
        reply = await grader.complete(spec, messages, reply=prompts.SELECT_BEST_REPLY)
    if reply.error or not reply.text:
        given.drop()
        return [_tag(grader_error(reply.error or "No output", reply.text, reply.tokens), assertion) for _ in rows]
    from factcli.scoring.replies import ReplyError

    try:
        verdict = prompts.read_select_best(reply.text)
        if verdict >= len(rows):
            raise ReplyError(f"Invalid select-best verdict: {verdict}")
    except ReplyError as exc:
        given.drop()
        return [_tag(grader_error(str(exc), reply.text, reply.tokens), assertion) for _ in rows]
    return [_tag(GradingResult(i == verdict, 1.0 if i == verdict else 0.0,
                               f"Output selected as the best: {criteria}" if i == verdict
                               else f"Output not selected: {criteria}", tokens_used=reply.tokens,
                               metadata={"graderRaw": reply.text}), assertion) for i in range(len(rows))]


def _tag(result: GradingResult, assertion) -> GradingResult:
    result.assertion = assertion
    return result


def _text(r: EvalResult) -> str:
    out = r.response.output
    if out is None or out == "":
        return ""
    return out if isinstance(out, str) else json.dumps(out)


def max_score(assertion, rows: list[EvalResult]) -> list[GradingResult]:
    value = assertion.value if isinstance(assertion.value, dict) else {}
    method = value.get("method", "average")
    weights = value.get("weights") or {}
    threshold = value.get("threshold")
    scores = []
    for r in rows:
        comps = [c for c in (r.grading.component_results if r.grading else [])
                 if c.assertion is not None and c.assertion.type not in COMPARING]
        total, weight_sum = 0.0, 0.0
        for c in comps:
            w = weights.get(c.assertion.type, 1)
            total += (c.score or 0) * w
            weight_sum += w
        agg = total if method == "sum" else (total / weight_sum if weight_sum > 0 else 0.0)
        scores.append((agg, len(comps), weight_sum))
    best, winner = -math.inf, 0
    for i, (s, _, _) in enumerate(scores):
        if s > best:
            best, winner = s, i
    meets = threshold is None or best >= threshold
    out = []
    for i, (s, count, wsum) in enumerate(scores):
        won = i == winner and meets
        if won:
            reason = f"Selected as highest scoring output (score: {templating.to_fixed(s, 3)})"
        elif s == best and not meets:
            reason = f"Not selected - score {templating.to_fixed(s, 3)} below threshold {templating.js_string(threshold)}"
        else:
            reason = f"Not selected (score: {templating.to_fixed(s, 3)}, max: {templating.to_fixed(best, 3)})"
        out.append(_tag(GradingResult(won, 1.0 if won else 0.0, reason,
                                      named_scores={"maxScore": s, "assertionCount": count, "totalWeight": wsum}),
                        assertion))
    return out


def _apply_select_best(run, row: EvalResult, res: GradingResult) -> None:
    was_success, was_score = row.success, row.score
    if row.grading is not None:
        row.grading.passed = row.grading.passed and res.passed
        row.success = row.grading.passed
        if not res.passed:
            row.grading.reason = res.reason
            row.score = row.grading.score = res.score
        row.grading.component_results.append(res)
        row.grading.tokens_used.add(res.tokens_used)
    else:
        row.success = row.success and res.passed
        if not res.passed:
            row.score = res.score
    _update_stats(run, row, res, was_success, was_score)


def _apply_max_score(run, row: EvalResult, res: GradingResult) -> None:
    was_success, was_score = row.success, row.score
    g = row.grading
    previous = g.passed if g is not None else row.success
    new_pass = previous and res.passed
    new_score = (g.score if g is not None else row.score) if res.passed else res.score
    if g is None:
        g = row.grading = GradingResult(new_pass, new_score, "")
    if not res.passed and previous:
        g.reason = res.reason
    g.passed, g.score = new_pass, new_score
    g.component_results.append(res)
    g.named_scores = {**g.named_scores, **res.named_scores}
    row.success = new_pass
    if not res.passed:
        row.score = new_score
    _update_stats(run, row, res, was_success, was_score)


def _update_stats(run, row: EvalResult, res: GradingResult, was_success: bool, was_score: float) -> None:
    m = run.metrics[row.step.prompt_idx]
    if res.passed:
        m.assert_pass += 1
    else:
        m.assert_fail += 1
        if row.score != was_score:
            m.score += row.score - was_score
    m.grader_tokens.add(res.tokens_used)
    if "graderCalls" in res.metadata:
        cost = res.metadata["graderCost"]
        if cost is None:
            m.grader_unpriced += 1
        else:
            m.grader_cost += cost
        if row.grading is not None:
            spent = row.grading.metadata.get("graderCost", 0.0) if "graderCalls" in row.grading.metadata else 0.0
            row.grading.metadata = {**row.grading.metadata, "graderCalls": row.grading.metadata.get("graderCalls", 0) + 1,
                                    "graderCost": None if cost is None or spent is None else spent + cost}
    if grader_errored(res):
        m.grading_errors += 1
    if was_success and not row.success:
        row.error = res.reason
        m.test_pass -= 1
        if grader_errored(res):  # the comparison could not be judged: the row is not judged
            row.failure_reason = FAILURE_GRADING
            m.test_error += 1
            m.test_unjudged += 1
            m.unjudged_score += row.score
            m.unscored += 1
        else:
            row.failure_reason = FAILURE_ASSERT
            m.test_fail += 1
