"""RAGAS's retrieval metrics as assertions: `context-precision` and `noise-sensitivity` (issue 52).

Both read the passages as the other RAG types do (the `context` var, else the assertion's
`contextTransform`: rag.resolve_context), a list being the passages in the retriever's order (a text
is one passage), and the question from the `query` var, else the prompt.

context-precision (RAGAS's ContextPrecision, src/ragas/metrics/_context_precision.py): one judge call
per passage, "was this passage useful in arriving at the answer?", verdict 1/0 with a reason. The
answer is the assertion's `value` (the reference: RAGAS's ContextPrecision / "with reference"), else
the output (RAGAS's ContextUtilization / "without reference"). With v_k the verdict of the passage at
rank k of K:

    context precision = Σ_k (precision@k × v_k) / (Σ_k v_k + 1e-10),  precision@k = (Σ_{i≤k} v_i) / k

so a useful passage ranked first counts for more than one ranked last; no useful passage scores 0.

noise-sensitivity (RAGAS's NoiseSensitivity, src/ragas/metrics/_noise_sensitivity.py): the judge
splits the reference (the `value`) and the answer into statements, then judges, for each passage,
every reference statement and every answer statement against it, and every answer statement against
the reference (2 + 2K + 1 calls). A passage is relevant when it supports a reference statement; an
answer statement is incorrect when the reference does not support it. Then

    relevant   = share of answer statements that are incorrect and supported by a relevant passage
    irrelevant = share of answer statements that are incorrect, supported by an irrelevant passage and
                 by no relevant one

(`config.mode`, default `relevant`). Lower is better; the assertion's score is 1 − noise sensitivity
(every assertion's score is higher-better: it sits in the row's weighted score, a metric's mean and a
`min` gate), the figure itself in `metadata.noiseSensitivity`.

Prompts: context-precision's is `rubricPrompt`; noise-sensitivity's two are `rubricPrompt` as a list
(statements, then verdicts), as context-faithfulness reads it. Both: threshold default 0 (as
promptfoo's RAG types), `not-` inverts. Every passage's verdict and
reason is kept in `metadata.passageVerdicts` ({passage, text, relevant, reason}), which `show`, the
web cell page and the HTML report list. A call that failed, or a reply outside its step's schema (a
verdict other than 0/1, a verdict list whose length is not the statements'), is a grading error, never
a 0; no statement in the answer or the reference leaves noise sensitivity undefined (RAGAS: NaN), a
grading error too.
"""

from __future__ import annotations

from typing import Any

from factcli import templating
from factcli.assertions import rag_prompts as prompts
from factcli.assertions.rag import EPSILON, _answer_text, resolve_context, step_prompts
from factcli.scoring.gather import gather_all
from factcli.scoring.grading import grader_error, render_grading_prompt
from factcli.scoring.registry import AssertionContext, AssertionError_, assertion
from factcli.scoring.replies import Int, ListOf, Obj, Reply, ReplyError, Text
from factcli.types import GradingResult, TokenUsage

RAGAS_EPSILON = 1e-10  # RAGAS's denominator term: no useful passage scores 0, not NaN
MODES = ("relevant", "irrelevant")

PRECISION_REPLY = Reply("context_precision_verdict", Obj(reason=Text(), verdict=Int()), 512,
                        types=("context-precision",))
STATEMENTS_REPLY = Reply("noise_statements", Obj(statements=ListOf(Text())), 1024, types=("noise-sensitivity",),
                         calls=2)
VERDICTS_REPLY = Reply("noise_verdicts",
                       Obj(statements=ListOf(Obj(statement=Text(), reason=Text(), verdict=Int()))), 1536,
                       types=("noise-sensitivity",), calls=3)


class _Unjudged(Exception):
    def __init__(self, reason: str, raw: str | None):
        super().__init__(reason)
        self.raw = raw


def _binary(value: int, where: str) -> int:
    if value not in (0, 1):
        raise ReplyError(f"{where} must be 0 or 1, got {value}")
    return value


async def _ask(grader, spec, template: Any, variables: dict, reply: Reply, tokens: TokenUsage, step: str,
               check=None) -> dict:
    """One step's reply read by its shape: the schema's reading, else (a server that refused the schema
    outright) the same reader over its words; then `check` (what the schema cannot say: a verdict 0 or 1,
    a verdict per statement), raising ReplyError. Anything else is _Unjudged, keeping what the judge sent."""
    got = await grader.complete(spec, render_grading_prompt(template, variables), reply=reply)
    tokens.add(got.tokens)
    if got.error or not got.text:
        raise _Unjudged(f"{step}: {got.error or 'No output'}", got.raw or got.text)
    try:
        parsed = got.parsed if got.parsed is not None else reply.read(got.text)
    except ReplyError as exc:
        raise _Unjudged(f"{step}: the judge's reply does not fit the {reply.name} step's JSON schema: {exc}",
                        got.text) from None
    try:
        return check(parsed) if check else parsed
    except ReplyError as exc:
        raise _Unjudged(f"{step}: {exc}", got.raw or got.text) from None


def _passages(context: str | list[str]) -> list[str]:
    return context if isinstance(context, list) else [context]


def _question(ctx: AssertionContext) -> str:
    query = ctx.vars.get("query")
    if isinstance(query, str) and query.strip():
        return query
    if not ctx.prompt:
        raise AssertionError_(f"{ctx.assertion.base_type} needs the question: a `query` var, or a prompt")
    return ctx.prompt


def _verdict(passed: bool, score: float, ctx: AssertionContext) -> tuple[bool, float]:
    return (not passed, 1.0 - score) if ctx.inverse else (passed, score)


def _fixed(x: float) -> str:
    return templating.to_fixed(x + 0.0)


# ---------------------------------------------------------------- context-precision


def average_precision(verdicts: list[int]) -> float:
    """RAGAS's _calculate_average_precision: mean over ranks of precision@k × v_k, over the useful ones."""
    numerator = sum(sum(verdicts[:i + 1]) / (i + 1) * verdicts[i] for i in range(len(verdicts)))
    return numerator / (sum(verdicts) + RAGAS_EPSILON)


@assertion("context-precision", model_graded=True)
async def context_precision(ctx: AssertionContext) -> GradingResult:
    question = _question(ctx)
    passages = _passages(await resolve_context(ctx))
    with_reference = isinstance(ctx.value, str) and ctx.value.strip() != ""
    if ctx.value is not None and not with_reference:
        raise AssertionError_("context-precision: the value, when given, is the reference answer (a text)")
    answer = ctx.value if with_reference else _answer_text(ctx)
    threshold = ctx.threshold if ctx.threshold is not None else 0.0
    grader = ctx.need_grader()
    spec = grader.spec_for(ctx.assertion, ctx.test)
    template = ctx.rubric(prompts.CONTEXT_PRECISION)
    tokens = TokenUsage()
    meta: dict = {"context": passages, "grader": spec.id, "answerFrom": "reference" if with_reference else "output"}

    async def judge(k: int, passage: str) -> dict:
        return await _ask(grader, spec, template, {**ctx.vars, "question": question, "context": passage,
                                                   "answer": answer}, PRECISION_REPLY, tokens, f"passage {k + 1}",
                          lambda got: {**got, "verdict": _binary(got["verdict"], "verdict")})

    try:
        replies = await gather_all(judge(k, p) for k, p in enumerate(passages))
    except _Unjudged as exc:
        return grader_error(f"context-precision could not be graded: {exc}", exc.raw, tokens, **meta)
    verdicts = [r["verdict"] for r in replies]
    score = average_precision(verdicts)
    useful = 0
    rows = []
    for k, (passage, r) in enumerate(zip(passages, replies)):
        useful += r["verdict"]
        rows.append({"passage": k + 1, "text": passage, "relevant": bool(r["verdict"]), "reason": r["reason"].strip(),
                     "precisionAtK": useful / (k + 1)})
    passed, shown = _verdict(score >= threshold - EPSILON, score, ctx)
    ranks = ", ".join(str(r["passage"]) for r in rows if r["relevant"]) or "none"
    reason = (f"Context precision {_fixed(score)} is {'>=' if score >= threshold - EPSILON else '<'} "
              f"{templating.js_string(float(threshold))} ({sum(verdicts)} of {len(verdicts)} passages useful; "
              f"ranks: {ranks})")
    return GradingResult(passed, shown, reason, tokens_used=tokens,
                         metadata={**meta, "passageVerdicts": rows, "contextPrecision": score,
                                   "usefulPassages": sum(verdicts)})


# ---------------------------------------------------------------- noise-sensitivity


def noise_sensitivity(reference_by_passage: list[list[int]], answer_by_passage: list[list[int]],
                      answer_by_reference: list[int], mode: str = "relevant") -> float:
    """RAGAS's _compute_score, without numpy. reference_by_passage[j][i]: reference statement i supported
    by passage j; answer_by_passage[j][i]: answer statement i by passage j; answer_by_reference[i]: answer
    statement i supported by the reference."""
    relevant = [any(row) for row in reference_by_passage]  # np.max(retrieved2ground_truth, axis=0)
    counted = 0
    for i, correct in enumerate(answer_by_reference):
        from_relevant = any(relevant[j] and answer_by_passage[j][i] for j in range(len(relevant)))
        if mode == "irrelevant":
            hit = not from_relevant and any(not relevant[j] and answer_by_passage[j][i] for j in range(len(relevant)))
        else:
            hit = from_relevant
        counted += hit and not correct
    return counted / len(answer_by_reference)


def _mode_problem(a) -> str | None:
    mode = (a.config or {}).get("mode", "relevant")
    return None if mode in MODES else f"noise-sensitivity: config.mode must be relevant or irrelevant, got {mode!r}"


def _mode(ctx: AssertionContext) -> str:
    problem = _mode_problem(ctx.assertion)
    if problem:
        raise AssertionError_(problem)
    return (ctx.assertion.config or {}).get("mode", "relevant")


def preflight(a, base_dir, test=None) -> list[str]:
    """A mode misspelled is found before any call."""
    problem = _mode_problem(a)
    return [problem] if problem else []


@assertion("noise-sensitivity", model_graded=True, needs_value=True, preflight=preflight)
async def noise_sensitivity_assertion(ctx: AssertionContext) -> GradingResult:
    mode = _mode(ctx)
    if not isinstance(ctx.value, str) or not ctx.value.strip():
        raise AssertionError_("noise-sensitivity needs the reference answer as its value (a text)")
    reference = ctx.value
    question = _question(ctx)
    passages = _passages(await resolve_context(ctx))
    response = _answer_text(ctx)
    if not response.strip():
        raise AssertionError_("noise-sensitivity: the output is empty")
    threshold = ctx.threshold if ctx.threshold is not None else 0.0
    grader = ctx.need_grader()
    spec = grader.spec_for(ctx.assertion, ctx.test)
    tokens = TokenUsage()
    meta: dict = {"context": passages, "grader": spec.id, "mode": mode}
    statements_prompt, verdicts_prompt = step_prompts(ctx, prompts.NOISE_STATEMENTS, prompts.NOISE_VERDICTS)

    async def statements(text: str, step: str) -> list[str]:
        got = await _ask(grader, spec, statements_prompt, {**ctx.vars, "question": question, "answer": text},
                         STATEMENTS_REPLY, tokens, step)
        out = [s.strip() for s in got["statements"] if s.strip()]
        if not out:  # RAGAS: an empty mean, NaN
            raise _Unjudged(f"{step}: the judge found no statement, so noise sensitivity is undefined", None)
        return out

    def one_per_statement(items: list[str]):
        def check(got: dict) -> list[dict]:
            listed = got["statements"]
            if len(listed) != len(items):
                raise ReplyError(f"{len(listed)} verdicts for {len(items)} statements")
            return [{"reason": v["reason"].strip(), "verdict": _binary(v["verdict"], f"verdict {i + 1}")}
                    for i, v in enumerate(listed)]
        return check

    async def verdicts(items: list[str], context: str, step: str) -> list[dict]:
        return await _ask(grader, spec, verdicts_prompt, {**ctx.vars, "context": context, "statements": items},
                          VERDICTS_REPLY, tokens, step, one_per_statement(items))

    try:
        ref_statements, ans_statements = await gather_all([statements(reference, "reference statements"),
                                                           statements(response, "answer statements")])
        meta.update(referenceStatements=ref_statements, answerStatements=ans_statements)
        judged = await gather_all(
            [verdicts(ans_statements, reference, "answer against the reference")]
            + [verdicts(items, p, f"{name} against passage {j + 1}") for j, p in enumerate(passages)
               for items, name in ((ref_statements, "reference"), (ans_statements, "answer"))])
    except _Unjudged as exc:
        return grader_error(f"noise-sensitivity could not be graded: {exc}", exc.raw, tokens, **meta)
    by_reference, per_passage = judged[0], judged[1:]
    ref_by_passage = [[v["verdict"] for v in per_passage[2 * j]] for j in range(len(passages))]
    ans_by_passage = [[v["verdict"] for v in per_passage[2 * j + 1]] for j in range(len(passages))]
    correct = [v["verdict"] for v in by_reference]
    figure = noise_sensitivity(ref_by_passage, ans_by_passage, correct, mode)
    relevant = [any(row) for row in ref_by_passage]
    rows = []
    for j, passage in enumerate(passages):
        held = [(i + 1, v["reason"]) for i, v in enumerate(per_passage[2 * j]) if v["verdict"]]
        why = "; ".join(f"{i}: {r}" for i, r in held if r)
        rows.append({"passage": j + 1, "text": passage, "relevant": relevant[j],
                     "reason": (f"supports reference statement(s) {', '.join(str(i) for i, _ in held)}"
                                + (f" ({why})" if why else "") if held else "supports no statement of the reference")})
    claims = []
    for i, text in enumerate(ans_statements):
        rel = [j + 1 for j in range(len(passages)) if relevant[j] and ans_by_passage[j][i]]
        irr = [j + 1 for j in range(len(passages)) if not relevant[j] and ans_by_passage[j][i]]
        source = rel or irr
        where = ("a relevant passage" if rel else "an irrelevant passage" if irr else "no passage")
        claims.append({"text": text, "supported": bool(correct[i]),
                       "verdict": f"{'correct' if correct[i] else 'incorrect'}, from {where}",
                       "reason": by_reference[i]["reason"],
                       "evidence": passages[source[0] - 1] if source else None,
                       "evidenceId": f"passage {source[0]}" if source else None})
    score = 1.0 - figure
    ok = score >= threshold - EPSILON
    passed, shown = _verdict(ok, score, ctx)
    wrong = round(figure * len(ans_statements))
    reason = (f"Noise sensitivity ({mode}) {_fixed(figure)}: {wrong} of {len(ans_statements)} answer statements "
              f"incorrect and from {'a relevant' if mode == 'relevant' else 'only an irrelevant'} passage; score "
              f"{_fixed(score)} (1 − noise sensitivity) is {'>=' if ok else '<'} "
              f"{templating.js_string(float(threshold))}")
    return GradingResult(passed, shown, reason, tokens_used=tokens,
                         metadata={**meta, "noiseSensitivity": figure, "passageVerdicts": rows, "claims": claims})
