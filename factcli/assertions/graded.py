"""Model-graded assertions: factuality (A-E), llm-rubric, model-graded-closedqa, g-eval, similar.

Pass and score rules follow promptfoo 0.121.20 (promptfoo-semantics §5-§6). One deliberate
departure (contract §8): a grader reply that cannot be read, or a grader call that failed, is a
failure marked `graderError` (with the raw reply kept), counted apart from real failures and
never inverted by `not-`.

factuality, llm-rubric, model-graded-closedqa and g-eval also take a judge panel (`provider:` as a
list, `config.aggregate`): every judge grades exactly as a single grader would, and factcli.scoring.panels
aggregates their scores and pass votes (a judge that fails is left out and reported). `not-`
inverts the panel's result, never a judge's. A factuality judge's score is the weight of its
category; the panel's `category` is the one most judges chose (`panel_category`), the full
distribution is in `categories`, and the column's category counts count that one per assertion.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from factcli import templating
from factcli.templating.jsvalues import to_number
from factcli.assertions import prompts
from factcli.scoring.abstention import ABSTAIN_MODES, detect_abstention
from factcli.scoring.gather import gather_all
from factcli.scoring.grading import (
    FIRST_LETTER,
    as_template_text,
    extract_json_objects,
    grader_error,
    parse_json_maybe,
    render_grading_prompt,
)
from factcli.scoring.replies import Choice, Flag, ListOf, Number, Obj, Reply, ReplyError, Text
from factcli.scoring.judges import JudgeProblem, panel_of, panel_specs
from factcli.scoring.outcome import grader_errored
from factcli.scoring.panels import JudgeVerdict, PanelConfigError, aggregate, aggregate_mode, describe, judge_names
from factcli.scoring.registry import AssertionContext, AssertionError_, assertion, lookup
from factcli.types import GradingResult, TokenUsage


def _base_vars(ctx: AssertionContext) -> dict:
    """The row's vars for a rubric prompt: promptfoo prints the objects inside an array var one by one
    as compact JSON (render_grading_prompt does objects), so `{{ _conversation }}` shows each turn."""
    return {k: [json.dumps(x, separators=(",", ":"), ensure_ascii=False) if isinstance(x, (dict, list)) else x
                for x in v] if isinstance(v, list) else v
            for k, v in ctx.vars.items()}


# ---------------------------------------------------------------- judge panels

# The pass threshold of a panel's mean for types that have no threshold of their own (factuality,
# llm-rubric without `threshold`, closedqa): a judge's score there is 0-1 (a verdict or a weight),
# so "mean >= 0.5" reads as "at least half the judges' weight says pass".
PANEL_THRESHOLD = 0.5


def _panel_specs(ctx: AssertionContext):
    """The judges of a panel (`provider:` as a list; scoring/judges), or None when one grader grades."""
    panel = panel_of(ctx.assertion)
    if panel is None:
        return None
    try:
        return panel_specs(panel)
    except JudgeProblem as exc:
        raise AssertionError_(exc.detail) from None


async def _graded(ctx: AssertionContext, label: str, one, threshold: float, details=None) -> GradingResult:
    """Grade with the single grader (`one(spec)` as is), or with every judge of a panel, each
    graded by `one`, aggregated by factcli.scoring.panels. `details(result)` adds per-judge metadata."""
    specs = _panel_specs(ctx)
    if specs is None:
        grader = ctx.need_grader()
        return await one(grader.spec_for(ctx.assertion, ctx.test))
    ctx.need_grader()
    try:
        mode = aggregate_mode(ctx.assertion.config)
    except PanelConfigError as exc:
        raise AssertionError_(f"{label}: {exc}") from None
    results = await gather_all(one(spec) for spec in specs)
    tokens = TokenUsage()
    verdicts = []
    for name, spec, r in zip(judge_names(specs), specs, results):
        tokens.add(r.tokens_used)
        cost = r.metadata.get("graderCost")
        cost = cost if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None
        extra = {"id": spec.id, **(details(r) if details else {})}
        if r.metadata.get("graderRaw") is not None:
            extra["graderRaw"] = r.metadata["graderRaw"]
        if grader_errored(r):
            verdicts.append(JudgeVerdict(name, error=r.reason, raw=r.metadata.get("graderRaw"), cost=cost,
                                         details=extra))
        else:
            verdicts.append(JudgeVerdict(name, score=r.score, passed=r.passed, reason=r.reason, cost=cost,
                                         details=extra))
    panel = aggregate(verdicts, threshold, mode)
    meta = {**panel.metadata(), "threshold": threshold, "graderCost": panel.cost()}
    if panel.error:
        return grader_error(f"{label}: {panel.error}", panel.raw, tokens, **meta)
    return GradingResult(panel.passed, panel.score, describe(panel), tokens_used=tokens, metadata=meta)


# ---------------------------------------------------------------- factuality

CATEGORY_KEYS = {"A": "subset", "B": "superset", "C": "agree", "D": "disagree", "E": "differButFactual"}
CATEGORY_DESCRIPTIONS = {
    "A": "The submitted answer is a subset of the expert answer and is fully consistent with it.",
    "B": "The submitted answer is a superset of the expert answer and is fully consistent with it.",
    "C": "The submitted answer contains all the same details as the expert answer.",
    "D": "There is a disagreement between the submitted answer and the expert answer.",
    "E": "The answers differ, but these differences don't matter from the perspective of factuality.",
}
DEFAULT_WEIGHTS = {"A": 1.0, "B": 1.0, "C": 1.0, "D": 0.0, "E": 1.0}

# The replies each step asks for (scoring/replies.py): the schema sent, the cap, and the text form its
# prompt asks for (`protocol`: the reader below, promptfoo's, that also reads a server's plain words).
FACTUALITY_REPLY = Reply("factuality", Obj(category=Choice(*CATEGORY_KEYS), reason=Text()), 512,
                         types=("factuality", "model-graded-factuality"), protocol=lambda t: read_factuality(t))
RUBRIC_REPLY = Reply("llm_rubric", Obj(reason=Text(), **{"pass": Flag()}, score=Number()), 512, types=("llm-rubric",),
                     protocol=lambda t: read_rubric_verdict(t))
CLOSEDQA_REPLY = Reply("closedqa", Obj(reasoning=Text(), verdict=Choice("Y", "N")), 512,
                       types=("model-graded-closedqa",),
                       as_text=lambda v: f"{v['reasoning'].rstrip()}\n{v['verdict']}",  # promptfoo reads the last letter
                       protocol=lambda t: read_closedqa(t))
GEVAL_STEPS_REPLY = Reply("geval_steps", Obj(steps=ListOf(Text(), 1)), 1024, types=("g-eval",),
                          protocol=lambda t: read_geval_steps(t))
# no bounds in the schemas: not every provider's strict mode takes minimum/maximum; the steps check ranges
GEVAL_SCORE_REPLY = Reply("geval_score", Obj(score=Number(), reason=Text()), 512, types=("g-eval",),
                          protocol=lambda t: read_geval_result(t))


def factuality_weights(options: dict) -> dict:
    custom = options.get("factuality") or {}
    weights = dict(DEFAULT_WEIGHTS)
    for letter, key in CATEGORY_KEYS.items():
        if isinstance(custom.get(key), (int, float)) and not isinstance(custom.get(key), bool):
            weights[letter] = float(custom[key])
    return weights


class _InvalidCategory(ValueError):
    pass


def parse_factuality(text: str) -> tuple[str, str, str] | None:
    """-> (letter, reason, how) or None. JSON `{category, reason}` first, then the `(A)` form."""
    for obj in extract_json_objects(text)[:1]:
        category = obj.get("category")
        if isinstance(category, str) and category:
            letter = category.strip().upper()
            if letter not in CATEGORY_KEYS:
                raise _InvalidCategory(f"Invalid category value: {letter}")
            reason = obj.get("reason")
            reason = reason.strip() if isinstance(reason, str) else ""
            return letter, reason or f"Category {letter}: {CATEGORY_DESCRIPTIONS[letter]}", "json"
    m = FIRST_LETTER.search(text)
    if not m:
        return None
    letter = m.group(1).upper()
    after = text[text.index(")", m.start(1)) + 1:].strip()
    return letter, after or text, "legacy"


def read_factuality(text: str) -> tuple[str, str, str]:
    """The factuality step's reader (its `protocol` too): parse_factuality, with promptfoo's messages."""
    try:
        parsed = parse_factuality(text)
    except _InvalidCategory as exc:
        raise ReplyError(str(exc)) from None
    if parsed is None:
        raise ReplyError(f"Factuality checker output did not match expected format: {text}")
    return parsed


@assertion("factuality", "model-graded-factuality", model_graded=True, needs_value=True)
async def factuality(ctx: AssertionContext) -> GradingResult:
    if not isinstance(ctx.value, str):
        raise AssertionError_("factuality assertion type must have a string value")
    if not ctx.prompt:
        raise AssertionError_("factuality assertion type must have a prompt")
    abstain = _abstention_rule(ctx)  # before any call: a bad config.abstain costs nothing
    weights = factuality_weights(ctx.test.options)
    threshold = ctx.threshold if ctx.threshold is not None else PANEL_THRESHOLD
    result = await _graded(ctx, "factuality", lambda spec: _factuality_one(ctx, spec, weights), threshold,
                           lambda r: {"category": r.metadata["category"]} if r.metadata.get("category") else {})
    judges = result.metadata.get("judges")
    if judges is not None:
        letters = [j["category"] for j in judges if j.get("category") and "error" not in j]
        if letters:
            result.metadata["categories"] = {k: letters.count(k) for k in sorted(set(letters))}
            result.metadata["category"] = panel_category(letters, weights)
    if abstain is not None:  # graded as usual; the column's SimpleQA figures count it as not attempted
        result.metadata["abstained"] = bool(abstain)
        if abstain:
            result.metadata["abstainReason"] = abstain
    return result


def _abstention_rule(ctx: AssertionContext) -> str | None:
    """With `config.abstain` (FActScore's rules; off by default for factuality): the rule that fires
    for this output, "" when none does; None when abstention is not checked."""
    mode = ctx.assertion.config.get("abstain", "none")
    if mode == "none":
        return None
    if mode not in ABSTAIN_MODES:
        raise AssertionError_(f"factuality: config.abstain must be one of {', '.join(ABSTAIN_MODES)}, got {mode!r}")
    phrases = ctx.assertion.config.get("abstain_phrases") or []
    if isinstance(phrases, str):
        phrases = [phrases]
    if not isinstance(phrases, list) or not all(isinstance(p, str) for p in phrases):
        raise AssertionError_("factuality: config.abstain_phrases must be a list of strings")
    lookup("simpleqa")  # registers the SimpleQA report, which counts this row, in a run without simpleqa
    return detect_abstention(ctx.output_text, mode, phrases) or ""


def panel_category(letters: list[str], weights: dict) -> str:
    """The category a panel gives: the one most judges chose; a tie goes to the tied category with
    the lowest weight (the more cautious reading), then to the earlier letter."""
    counts = {k: letters.count(k) for k in set(letters)}
    return min(counts, key=lambda k: (-counts[k], weights.get(k, 0.0), k))


async def _factuality_one(ctx: AssertionContext, spec, weights: dict) -> GradingResult:
    grader = ctx.need_grader()
    variables = {**_base_vars(ctx), "input": ctx.prompt, "ideal": ctx.value,
                 "completion": as_template_text(parse_json_maybe(ctx.output_text))}
    messages = render_grading_prompt(ctx.rubric(prompts.FACTUALITY), variables)
    reply = await grader.complete(spec, messages, reply=FACTUALITY_REPLY)
    meta = {"renderedGradingPrompt": json.dumps(messages, ensure_ascii=False), "grader": spec.id}
    if reply.error or not reply.text:
        return grader_error(reply.error or "No output", reply.text, reply.tokens, **meta)
    try:
        letter, reason, how = read_factuality(reply.text)
    except ReplyError as exc:
        return grader_error(str(exc), reply.text, reply.tokens, **meta)
    score = weights[letter]
    # promptfoo: pass iff the weight is > 0; not- is ignored for factuality in 0.121.20
    return GradingResult(score > 0, score, reason, tokens_used=reply.tokens,
                         metadata={**meta, "category": letter, "parsedAs": how, "graderRaw": reply.text,
                                   "graderCost": reply.cost})


# ---------------------------------------------------------------- llm-rubric


def read_rubric_reply(reply_text: str | None, output, threshold, label: str = "llm-rubric"):
    """-> (pass, score, reason) or an error string, with promptfoo's coercions (runJsonGradingPrompt):
    the first JSON object; `pass` absent or null is true, any other non-boolean is true iff String(pass)
    is exactly true/yes/pass/y (any case); a non-number `score` is Number(score) when finite (null and
    "" are 0), else Number(pass)."""
    if isinstance(output, dict):
        parsed = output
    else:
        objects = extract_json_objects(reply_text or "")
        if not objects:
            return f"Could not extract JSON from {label} response"
        parsed = objects[0]
    passed = parsed.get("pass", True)
    if passed is None:
        passed = True
    if not isinstance(passed, bool):
        passed = re.fullmatch(r"(?:true|yes|pass|y)", templating.js_string(passed), re.I) is not None
    score = parsed.get("score")
    if "score" not in parsed:  # undefined: Number(undefined) is NaN, so Number(pass)
        score = 1.0 if passed else 0.0
    elif isinstance(score, bool) or not isinstance(score, (int, float)):
        score = to_number(score)
        if not math.isfinite(score):
            score = 1.0 if passed else 0.0
    if isinstance(threshold, (int, float)) and math.isfinite(threshold):
        passed = passed and score >= threshold
    reason = parsed.get("reason")
    if not reason:
        reason = "Grading passed" if passed else f"Score {templating.js_string(score)} below threshold " \
                                                 f"{templating.js_string(threshold) if threshold is not None else 'undefined'}"
    return passed, float(score), str(reason) if not isinstance(reason, str) else reason


def read_rubric_verdict(text: str) -> tuple[bool, float, str]:
    """The llm-rubric step's text form (its `protocol`): promptfoo's reading of the first JSON object
    (`"pass": "true"` and a missing pass included), when that object holds a verdict, a `pass` or a
    `score`. An object with neither (a reason alone) is no judgment: promptfoo would pass it, factcli
    refuses it."""
    objects = extract_json_objects(text)
    if objects and "pass" not in objects[0] and "score" not in objects[0]:
        raise ReplyError(f"llm-rubric: the judge's JSON has neither pass nor score: {json.dumps(objects[0])[:200]}")
    read = read_rubric_reply(text, None, None)
    if isinstance(read, str):
        raise ReplyError(read)
    return read


def _rubric_preflight(a, base_dir: Path, test=None) -> list[str]:
    """No value and no rubricPrompt of one's own: the grader would be asked to score against an empty
    rubric (promptfoo sends it anyway; every verdict would be noise)."""
    if a.value not in (None, "") or a.rubric_prompt is not None:
        return []
    if test is not None and (test.options or {}).get("rubricPrompt"):
        return []
    return [f"{a.type} has no value: the grader would score against an empty rubric (write the rubric as "
            "its value:, or give a rubricPrompt that needs none)"]


@assertion("llm-rubric", model_graded=True, preflight=_rubric_preflight)
async def llm_rubric(ctx: AssertionContext) -> GradingResult:
    value = ctx.value
    if value is not None and not isinstance(value, (str, dict, list)):
        raise AssertionError_('"llm-rubric" assertion type must have a string or object value')
    rubric = value if value else ""
    if isinstance(rubric, (dict, list)):
        rubric = json.dumps(rubric, separators=(",", ":"), ensure_ascii=False)
    threshold = ctx.threshold if ctx.threshold is not None else PANEL_THRESHOLD
    result = await _graded(ctx, "llm-rubric", lambda spec: _llm_rubric_one(ctx, spec, rubric), threshold)
    if ctx.inverse and not grader_errored(result):
        result.passed = not result.passed
        result.score = min(1.0, max(0.0, 1 - (result.score if math.isfinite(result.score) else 0.0)))
    return result


async def _llm_rubric_one(ctx: AssertionContext, spec, rubric: str) -> GradingResult:
    grader = ctx.need_grader()
    variables = {**_base_vars(ctx), "output": as_template_text(parse_json_maybe(ctx.output_text)), "rubric": rubric}
    messages = render_grading_prompt(ctx.rubric(prompts.LLM_RUBRIC), variables)
    reply = await grader.complete(spec, messages, reply=RUBRIC_REPLY)
    meta = {"renderedGradingPrompt": json.dumps(messages, ensure_ascii=False), "grader": spec.id}
    if reply.error or not (reply.text or reply.output):
        return grader_error(reply.error or "No output", reply.text, reply.tokens, **meta)
    given = reply.parsed or reply.output
    if not isinstance(given, dict):  # the judge's words: the step's text form, which needs a verdict
        try:
            read_rubric_verdict(reply.text or "")
        except ReplyError as exc:
            return grader_error(str(exc), reply.text, reply.tokens, **meta)
    read = read_rubric_reply(reply.text, given, ctx.threshold)
    if isinstance(read, str):
        return grader_error(read, reply.text, reply.tokens, **meta)
    passed, score, reason = read
    return GradingResult(passed, score, reason, tokens_used=reply.tokens,
                         metadata={**meta, "graderRaw": reply.text, "graderCost": reply.cost})


# ---------------------------------------------------------------- closedqa


@assertion("model-graded-closedqa", model_graded=True, needs_value=True)
async def closedqa(ctx: AssertionContext) -> GradingResult:
    if not isinstance(ctx.value, str):
        raise AssertionError_("model-graded-closedqa assertion type must have a string value")
    if not ctx.prompt:
        raise AssertionError_("model-graded-closedqa assertion type must have a prompt")
    threshold = ctx.threshold if ctx.threshold is not None else PANEL_THRESHOLD
    return await _graded(ctx, "model-graded-closedqa", lambda spec: _closedqa_one(ctx, spec), threshold)


async def _closedqa_one(ctx: AssertionContext, spec) -> GradingResult:
    grader = ctx.need_grader()
    variables = {**_base_vars(ctx), "input": ctx.prompt, "criteria": ctx.value,
                 "completion": as_template_text(parse_json_maybe(ctx.output_text))}
    messages = render_grading_prompt(ctx.rubric(prompts.CLOSED_QA), variables)
    reply = await grader.complete(spec, messages, reply=CLOSEDQA_REPLY)
    meta = {"renderedGradingPrompt": json.dumps(messages, ensure_ascii=False), "grader": spec.id,
            "graderCost": reply.cost}
    if reply.error or not reply.text:
        return grader_error(reply.error or "No output", reply.text, reply.tokens, **meta)
    try:
        met = read_closedqa(reply.text)
    except ReplyError as exc:
        return grader_error(str(exc), reply.text, reply.tokens, **meta)
    said = "meets" if met else "does not meet"
    return GradingResult(met, 1.0 if met else 0.0, f"The submission {said} the criterion:\n{reply.text}",
                         tokens_used=reply.tokens, metadata={**meta, "graderRaw": reply.text})


def read_closedqa(text: str) -> bool:
    """The closedqa step's reader (its `protocol` too), promptfoo's: the reply, trailing whitespace
    removed, ends with Y (meets the criterion) or N (does not); anything else is malformed."""
    end = text.rstrip()[-1:]
    if end not in ("Y", "N"):
        raise ReplyError(f"Model grader produced a malformed response:\n{text}")
    return end == "Y"


# ---------------------------------------------------------------- g-eval


def read_geval_steps(text: str) -> list[str]:
    """The g-eval steps' reader (their `protocol` too), promptfoo's: the JSON from the first `{"steps"`
    to the last `}`, whose `steps` are non-empty strings."""
    m = re.search(r'\{"steps".+\}', text, re.S)
    try:
        steps = json.loads(m.group(0))["steps"] if m else None
    except (ValueError, KeyError, TypeError):
        steps = None
    if not isinstance(steps, list) or not steps or not all(isinstance(s, str) and s.strip() for s in steps):
        raise ReplyError(f"LLM-proposed evaluation steps are not in JSON format: {text}")
    return steps


def read_geval_result(text: str) -> tuple[float, str]:
    """The g-eval score's reader (its `protocol` too), promptfoo's: the JSON from the first `{` to the
    last `}`, a finite `score` within 0-10 (a numeric string is read as its number) and a reason."""
    m = re.search(r"\{.+\}", text, re.S)
    try:
        result = json.loads(m.group(0)) if m else None
    except ValueError:
        result = None
    if not isinstance(result, dict):
        raise ReplyError(f"LLM-proposed evaluation result is not in JSON format: {text}")
    raw = result.get("score")
    try:
        raw = float(raw) if not isinstance(raw, bool) and str(raw).strip() != "" else math.nan
    except (TypeError, ValueError):
        raw = math.nan
    if not math.isfinite(raw):
        raise ReplyError(f"G-Eval result has invalid or missing score: {json.dumps(result.get('score'))}")
    if raw < 0 or raw > 10:
        raise ReplyError(f"G-Eval result score {templating.js_string(raw)} is outside the expected 0-10 range")
    reason = result.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise ReplyError(f"G-Eval result has invalid or missing reason: {json.dumps(reason)}")
    return raw, reason


async def _geval_one(ctx: AssertionContext, spec, criteria: str, threshold: float):
    grader = ctx.need_grader()
    rubric = ctx.assertion.rubric_prompt if isinstance(ctx.assertion.rubric_prompt, dict) else \
        ctx.test.options.get("rubricPrompt") if isinstance(ctx.test.options.get("rubricPrompt"), dict) else {}
    tokens = TokenUsage()
    steps_reply = await grader.complete(spec, render_grading_prompt(rubric.get("steps") or prompts.GEVAL_STEPS,
                                                                    {"criteria": criteria}),
                                       reply=GEVAL_STEPS_REPLY)
    tokens.add(steps_reply.tokens)
    costs = [steps_reply.cost]
    if steps_reply.error or not steps_reply.text:
        return grader_error(steps_reply.error or f"G-Eval step-generation call to {spec.id} returned no output",
                            steps_reply.text, tokens)
    try:
        steps = read_geval_steps(steps_reply.text)
    except ReplyError as exc:
        return grader_error(str(exc), steps_reply.text, tokens)
    variables = {"criteria": criteria, "steps": "\n- ".join(steps), "maxScore": "10",
                 "input": as_template_text(parse_json_maybe(ctx.prompt)),
                 "output": as_template_text(parse_json_maybe(ctx.output_text))}
    reply = await grader.complete(spec, render_grading_prompt(rubric.get("evaluate") or prompts.GEVAL_EVALUATE,
                                                              variables), reply=GEVAL_SCORE_REPLY)
    tokens.add(reply.tokens)
    costs.append(reply.cost)
    if reply.error or not reply.text:
        return grader_error(reply.error or f"G-Eval evaluation call to {spec.id} returned no output", reply.text, tokens)
    try:
        raw, reason = read_geval_result(reply.text)
    except ReplyError as exc:
        return grader_error(str(exc), reply.text, tokens)
    cost = None if any(c is None for c in costs) else sum(costs)
    return GradingResult(raw / 10 >= threshold, raw / 10, reason, tokens_used=tokens,
                         metadata={"graderRaw": reply.text, "steps": steps, "graderCost": cost})


async def _geval_judge(ctx: AssertionContext, spec, criteria: list[str], threshold: float) -> GradingResult:
    """One grader over every criterion: the mean of its criterion scores (not yet inverted)."""
    results = []
    for i, c in enumerate(criteria):
        r = await _geval_one(ctx, spec, c, threshold)
        if grader_errored(r):
            if len(criteria) > 1:
                r.reason = f"G-Eval criterion {i + 1}/{len(criteria)} ({json.dumps(c)}) failed: {r.reason}"
            return r
        results.append(r)
    score = sum(r.score for r in results) / len(results)
    costs = [r.metadata.get("graderCost") for r in results]
    out = GradingResult(score >= threshold, score, "\n\n".join(r.reason for r in results),
                        metadata={"graderCost": None if any(c is None for c in costs) else sum(costs)})
    for r in results:
        out.tokens_used.add(r.tokens_used)
    return out


@assertion("g-eval", model_graded=True, needs_value=True)
async def g_eval(ctx: AssertionContext) -> GradingResult:
    value = ctx.value
    if not (isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))):
        raise AssertionError_("G-Eval assertion type must have a string or array of strings value")
    threshold = ctx.threshold if ctx.threshold is not None else 0.7
    criteria = value if isinstance(value, list) else [value]
    if not criteria:
        return GradingResult(False, 0.0, "G-Eval assertion requires at least one criterion string in the value array.")
    result = await _graded(ctx, "g-eval", lambda spec: _geval_judge(ctx, spec, criteria, threshold), threshold)
    if grader_errored(result):
        return result
    if ctx.inverse:
        result.passed = not result.passed
        result.score = 1 - result.score
    return result


# ---------------------------------------------------------------- similar


def _cosine(a: list[float], b: list[float]) -> float:
    if len(a) != len(b):
        raise AssertionError_("Vectors must be of equal length")
    dot = sum(x * y for x, y in zip(a, b))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)


def similarity_result(value: float, threshold: float, inverse: bool, metric: str) -> GradingResult:
    """promptfoo's buildSimilarityResult, reasons included."""
    eps = 2.220446049250313e-16
    t = templating.js_string(threshold)
    shown = templating.to_fixed(value, 2)
    if metric == "euclidean":
        passed = value >= threshold - eps if inverse else value <= threshold + eps
        normalized = 1 / (1 + value)
        below = f"Distance {shown} is less than or equal to threshold {t}"
        above = f"Distance {shown} is greater than threshold {t}"
        reason = (above if inverse else below) if passed else (below if inverse else above)
        return GradingResult(passed, 1 - normalized if inverse else normalized, reason)
    passed = value <= threshold + eps if inverse else value >= threshold - eps
    greater = f"Similarity {shown} is greater than or equal to threshold {t}"
    less = f"Similarity {shown} is less than threshold {t}"
    reason = (less if inverse else greater) if passed else (greater if inverse else less)
    return GradingResult(passed, 1 - value if inverse else value, reason)


async def _similar(ctx: AssertionContext, metric: str) -> GradingResult:
    value = ctx.value
    if not (isinstance(value, str) or isinstance(value, list)):
        raise AssertionError_("Similarity assertion type must have a string or array of strings value")
    if isinstance(value, list) and not value:
        raise AssertionError_("Similarity assertion must have at least one value to compare against")
    threshold = ctx.threshold if ctx.threshold is not None else 0.75
    grader = ctx.need_grader()
    spec = grader.spec_for(ctx.assertion, ctx.test, kind="embedding")
    from factcli.types import TokenUsage

    tokens = TokenUsage()
    out_vec, err, t1 = await grader.embed(spec, ctx.output_text)
    tokens.add(t1)
    if err:
        return grader_error(err, None, tokens)

    async def one(expected: str) -> GradingResult:
        exp_vec, err2, t2 = await grader.embed(spec, str(expected))
        tokens.add(t2)
        if err2:
            return grader_error(err2, None, tokens)
        if len(exp_vec) != len(out_vec):
            raise AssertionError_("Vectors must be of equal length")
        if metric == "cosine":
            measure = _cosine(exp_vec, out_vec)
        elif metric == "dot_product":
            measure = sum(x * y for x, y in zip(exp_vec, out_vec))
        else:
            measure = math.dist(exp_vec, out_vec)
        res = similarity_result(measure, threshold, ctx.inverse, metric)
        res.tokens_used = tokens
        return res

    if not isinstance(value, list):
        return await one(value)
    if ctx.inverse:
        closest = None
        for expected in value:
            res = await one(expected)
            if not res.passed:
                return res
            if closest is None or res.score < closest.score:
                closest = res
        return closest
    best = -math.inf
    for expected in value:
        res = await one(expected)
        if res.passed:
            return res
        best = max(best, res.score)
    return GradingResult(False, best, "None of the provided values met the similarity threshold", tokens_used=tokens)


@assertion("similar", "similar:cosine", model_graded=True, needs_value=True)
async def similar(ctx):
    return await _similar(ctx, "cosine")


@assertion("similar:dot", model_graded=True, needs_value=True)
async def similar_dot(ctx):
    return await _similar(ctx, "dot_product")


@assertion("similar:euclidean", model_graded=True, needs_value=True)
async def similar_euclidean(ctx):
    return await _similar(ctx, "euclidean")


# select-best and max-score compare a test's columns after every row has run (factcli.assertions.compare);
# they are registered so configs validate, and the per-row runner skips them.


@assertion("select-best", model_graded=True, needs_value=True)
def select_best(ctx):  # pragma: no cover - never called per row
    raise AssertionError_("select-best runs after all rows")


@assertion("max-score")
def max_score(ctx):  # pragma: no cover - never called per row
    raise AssertionError_("max-score runs after all rows")
