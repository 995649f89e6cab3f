"""RAG-style model-graded assertions: answer-relevance, context-faithfulness, context-recall,
context-relevance and conversation-relevance.

Pass, score and reasons follow promptfoo 0.121.20:

- answer-relevance: the grader writes a question for the output three times; the score is the mean
  cosine similarity between the embedding of each question and of the `query` var (else the
  prompt). Threshold default 0. factcli's `config.noncommittal: true` is RAGAS's ResponseRelevancy:
  each call also flags the answer noncommittal (0/1), and when all three do the score is 0.
- context-faithfulness: the grader splits the output into statements (one per line), then gives a
  Yes/No verdict per statement against the context; score = share of supported statements, with
  missing verdicts counted as unsupported. Needs a `query` var. Threshold default 0.
- context-recall: the grader tags each sentence of the expected value `[Attributed]` or
  `[Not Attributed]`; score = share attributed. The context falls back to the prompt. Threshold 0.
- context-relevance: the grader copies the context sentences needed to answer `query`; score =
  their count over the number of context units (chunks, lines, or sentences), capped at 1.
  Threshold default 0.
- conversation-relevance: a yes/no verdict for every sliding window (`config.windowSize`, default 5)
  of the conversation (`_conversation` var, else the prompt and output); score = share of relevant
  windows. Threshold default 0.5. The only one of these that honours `not-`.

The context comes from the `context` var (a string or a list of strings) or from `contextTransform`,
which receives the provider's output and `{vars, prompt: {label}, metadata}`.

factcli's departure (contract §8): a grader call that failed, or a reply with nothing to read in it
(no statements, no verdicts, no `[Attributed]` tags, nothing extracted), is a failure marked
`graderError`, never a score of 0 that a threshold of 0 would pass. Where promptfoo fails too, the
pass, score and reason are promptfoo's; the flag is the only difference.
"""

from __future__ import annotations

import json
import re
from typing import Any

from factcli import templating
from factcli.assertions import rag_prompts as prompts
from factcli.assertions.rag_attribution import faithfulness_claims, recall_claims
from factcli.assertions.rag_noncommittal import NONCOMMITTAL_REPLY, noncommittal_mode, read_noncommittal
from factcli.assertions.rag_noncommittal import preflight as noncommittal_preflight
from factcli.scoring.grading import (
    as_template_text,
    extract_json_objects,
    grader_error,
    load_rubric_prompt,
    parse_json_maybe,
    render_grading_prompt,
)
from factcli.scoring.content import COPIED, RESTATED, Sent, listed
from factcli.scoring.outcome import grader_errored
from factcli.scoring.replies import Choice, Flag, ListOf, Obj, Reply, ReplyError, Text
from factcli.scoring.registry import AssertionContext, AssertionError_, assertion
from factcli.types import GradingResult, TokenUsage

EPSILON = 2.220446049250313e-16  # JavaScript's Number.EPSILON
QUESTIONS = 3  # answer-relevance: candidate questions per output
# JavaScript's whitespace (String.prototype.trim, \s), which differs a little from Python's.
JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
           "\u2028\u2029\u202f\u205f\u3000\ufeff"
_SENTENCE_BREAK = re.compile(f"(?<=[.!?])[{JS_SPACE}]+")
_LIST_MARKER = re.compile(r"^\d+[.)]$")
_NUMBERED = re.compile(r"^\d+\.[" + JS_SPACE + r"]*([^.]+\.)")

ATTRIBUTED = "[Attributed]"
NOT_ATTRIBUTED = "[Not Attributed]"
INSUFFICIENT = "Insufficient Information"


def _line(text: str) -> str:
    return " ".join(text.split())


# The replies each step asks for (scoring/replies.py). These steps read promptfoo's text forms, so a
# structured reply is written back into that form (`as_text`) and read by the same code; `protocol` is
# that reader, for a server that ignores the schema and answers in the prompt's form. The statements
# step's prompt asks for one statement per line and nothing else, so its lines are its text form (as
# promptfoo reads them). The sentences context-relevance copies out have no form prose could not take
# (its count of lines is its score): it reads only its exact `Insufficient Information` as words, and
# prose there stays a grading error. What the lists must contain (scoring/content.py): statements that come
# from the answer (or the question it answers), sentences copied from the context; an empty list of
# sentences is the judge's "Insufficient Information" (docs/scoring.md).
QUESTION_REPLY = Reply("answer_relevance_question", Obj(question=Text()), 256, types=("answer-relevance",),
                       calls=QUESTIONS, as_text=lambda v: v["question"], protocol=lambda t: read_question(t))
STATEMENTS_REPLY = Reply("faithfulness_statements", Obj(statements=ListOf(Text(), 1)), 1024,
                         types=("context-faithfulness",),
                         as_text=lambda v: "\n".join(_line(x) for x in v["statements"]),
                         protocol=lambda t: {"statements": split_lines(t) or _refuse(NO_STATEMENTS)},
                         content=listed("statements", "statement", RESTATED))
VERDICTS_REPLY = Reply("faithfulness_verdicts", Obj(verdicts=ListOf(Obj(reason=Text(), verdict=Choice("Yes", "No")))),
                       1536, types=("context-faithfulness",),
                       as_text=lambda v: "\n".join(f"Verdict: {x['verdict']}." for x in v["verdicts"]),
                       protocol=lambda t: verdict_counts(t))
RECALL_REPLY = Reply("context_recall",
                     Obj(sentences=ListOf(Obj(sentence=Text(), reason=Text(), attributed=Flag()), 1)), 1536,
                     types=("context-recall",),
                     as_text=lambda v: "\n".join(
                         f"{i}. {_line(x['sentence']).replace('.', ' ').strip() or '-'}. "
                         f"{ATTRIBUTED if x['attributed'] else NOT_ATTRIBUTED}"
                         for i, x in enumerate(v["sentences"], 1)),
                     protocol=lambda t: recall_attributions(t) or _refuse(UNTAGGED),
                     content=listed("sentences", "sentence", COPIED, "sentence"))
RELEVANCE_REPLY = Reply("context_relevance", Obj(sentences=ListOf(Text())), 1536, types=("context-relevance",),
                        as_text=lambda v: "\n".join(_line(x) for x in v["sentences"] if _line(x)) or INSUFFICIENT,
                        protocol=lambda t: js_trim(t) == INSUFFICIENT or _refuse(
                            "the judge's reply does not fit the context_relevance step's JSON schema, and its "
                            f"copied sentences cannot be told from prose (only '{INSUFFICIENT}' is read as words)"),
                        content=listed("sentences", "sentence", COPIED))
WINDOW_REPLY = Reply("conversation_relevance", Obj(verdict=Choice("yes", "no"), reason=Text()), 256,
                     types=("conversation-relevance",), protocol=lambda t: _refuse_str(read_verdict(t)))
SUMMARY_REPLY = Reply("conversation_relevance_reason", Obj(reason=Text()), 512, types=("conversation-relevance",),
                      protocol=lambda t: summary_reason(t) or _refuse("no JSON object with a reason"))
UNTAGGED = f"no sentence in the grader's reply is tagged {ATTRIBUTED} or {NOT_ATTRIBUTED}"
NO_VERDICTS = "the grader's reply has no Yes/No verdicts"
NO_STATEMENTS = "the grader wrote no statements for the output"


def _refuse(message: str):
    raise ReplyError(message)


def _refuse_str(read):
    """A reader's result, or its error message (a string) raised."""
    return _refuse(read) if isinstance(read, str) else read
FINAL_VERDICTS = "final verdict for each statement in order:"
NOT_RELEVANT = "Response is not relevant to the conversation context"
CONTEXT_REQUIRED = ('Context is required for context-based assertions. Provide either a "context" variable '
                    '(string or array of strings) in your test case or use "contextTransform" to extract '
                    "context from the provider response.")


# ---------------------------------------------------------------- shared helpers


def js_trim(text: str) -> str:
    return text.strip(JS_SPACE)


def split_lines(text: str) -> list[str]:
    """The non-blank lines of a reply, untrimmed (promptfoo's splitIntoSentences)."""
    return [line for line in text.split("\n") if js_trim(line)]


def split_units(text: str) -> list[str]:
    """Sentence-level units: the lines if there are two or more, else the sentences of the prose."""
    lines = split_lines(text)
    parts = lines if len(lines) > 1 else _SENTENCE_BREAK.split(text)
    return [p for p in (js_trim(s) for s in parts) if p and not _LIST_MARKER.match(p)]


def _js_typeof(value: Any) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "object"
    return "function" if callable(value) else "object"


def _js_truthy(value: Any) -> bool:
    if isinstance(value, (list, dict)):
        return True  # [] and {} are truthy in JavaScript
    if isinstance(value, float) and value != value:
        return False
    return bool(value)


def _num(value: float) -> str:
    return templating.js_string(float(value))


def _fixed(value: float) -> str:
    return templating.to_fixed(value + 0.0)  # no "-0.00"


def _context_text(context: str | list[str]) -> str:
    return "\n\n".join(context) if isinstance(context, list) else context


def _cosine(a: list[float], b: list[float]) -> float:
    """Left-to-right sums, as JavaScript's reduce does (Python's sum() may compensate)."""
    if len(a) != len(b):
        raise AssertionError_("Vectors must be of equal length")
    dot = na = nb = 0.0
    for x, y in zip(a, b):
        dot += x * y
        na += x * x
        nb += y * y
    na, nb = na ** 0.5, nb ** 0.5
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)


def _threshold(ctx: AssertionContext, default: float = 0.0) -> float:
    return default if ctx.threshold is None else ctx.threshold


def _unreadable(name: str, score_reason: str, threshold: float, detail: str,
                raw: str | None, tokens: TokenUsage, **meta) -> GradingResult:
    """A reply with nothing to read: promptfoo scores it 0. factcli fails it as a grading error,
    keeping promptfoo's reason when promptfoo fails it too (a threshold above 0)."""
    would_fail = 0.0 < threshold - EPSILON
    return grader_error(score_reason if would_fail else f"{name} could not be graded: {detail}", raw, tokens,
                        graderErrorDetail=detail, **meta)


def _transform_label(spec: str) -> str:
    """How promptfoo names a transform in its error messages."""
    if spec.startswith("file://"):
        return "[file transform]"
    single = " ".join(spec.split())
    return f"[inline transform]: {single if len(single) <= 80 else single[:79] + '…'}"


async def resolve_context(ctx: AssertionContext, fallback: str | None = None) -> str | list[str]:
    """The context for a context-based assertion: the `context` var, else `fallback`; then
    `contextTransform` if set. It must be a non-empty string or a list of non-empty strings."""

    raw = ctx.vars.get("context")
    context: Any = None
    if _js_truthy(raw):
        if isinstance(raw, str):
            context = raw
        elif isinstance(raw, list):
            for i, item in enumerate(raw):
                if not isinstance(item, str):
                    raise AssertionError_(f"Invalid context: expected an array of strings, but found "
                                          f"{_js_typeof(item)} at index {i}")
            context = raw
    elif fallback:
        context = fallback
    spec = ctx.assertion.context_transform
    if spec:
        label = _transform_label(spec)
        try:
            transformed = await ctx.transformed_context()
            if not (isinstance(transformed, str) or
                    (isinstance(transformed, list) and all(isinstance(x, str) for x in transformed))):
                raise ValueError(f"contextTransform must return a string or array of strings. Got "
                                 f"{_js_typeof(transformed)}. Check your transform expression: {label}")
        except Exception as exc:
            message = str(exc)
            wrapper = f"Transform failed ({label}): "
            if message.startswith(wrapper):
                message = message[len(wrapper):]
            raise AssertionError_(f"Failed to transform context using expression '{label}': {message}") from exc
        context = transformed
    if not ((isinstance(context, str) and context) or
            (isinstance(context, list) and context and all(isinstance(x, str) and x for x in context))):
        raise AssertionError_(CONTEXT_REQUIRED)
    return context


def _require_query(ctx: AssertionContext, name: str) -> str:
    query = ctx.vars.get("query")
    if not isinstance(query, str):
        raise AssertionError_(f'{name} assertion requires a "query" variable with the user question')
    return query


def _answer_text(ctx: AssertionContext) -> str:
    """The output as promptfoo puts it into a grading prompt: JSON parsed, objects re-serialised."""
    return as_template_text(parse_json_maybe(ctx.output))


# ---------------------------------------------------------------- answer-relevance

@assertion("answer-relevance", model_graded=True, preflight=noncommittal_preflight)
async def answer_relevance(ctx: AssertionContext) -> GradingResult:
    if not isinstance(ctx.output, str):
        raise AssertionError_("answer-relevance assertion type must evaluate a string output")
    if not ctx.prompt:
        raise AssertionError_("answer-relevance assertion type must have a prompt")
    query = ctx.vars.get("query")
    query = query if isinstance(query, str) else ctx.prompt
    threshold = _threshold(ctx)
    ragas = noncommittal_mode(ctx)
    grader = ctx.need_grader()
    spec = grader.spec_for(ctx.assertion, ctx.test)
    embedder = grader.spec_for(ctx.assertion, ctx.test, kind="embedding")
    tokens = TokenUsage()
    default = prompts.ANSWER_RELEVANCE_NONCOMMITTAL if ragas else prompts.ANSWER_RELEVANCE
    messages = render_grading_prompt(ctx.rubric(default), {"answer": _answer_text(ctx)})
    meta = {"renderedGradingPrompt": json.dumps(messages, ensure_ascii=False), "grader": spec.id,
            "embedder": embedder.id}
    questions: list[str] = []
    flags: list[int] = []
    for _ in range(QUESTIONS):
        reply = await grader.complete(spec, messages, reply=NONCOMMITTAL_REPLY if ragas else QUESTION_REPLY)
        tokens.add(reply.tokens)
        if reply.error or not reply.text or not js_trim(reply.text):
            return grader_error(reply.error or "No output", reply.text, tokens, **meta)
        if ragas:
            try:
                question, flag = read_noncommittal(reply.parsed, reply.text)
            except ReplyError as exc:
                return grader_error(f"answer-relevance: {exc}", reply.text, tokens, **meta)
            questions.append(question)
            flags.append(flag)
            continue
        if reply.parsed is None:  # the judge's words: one question, on one line
            try:
                read_question(reply.text)
            except ReplyError as exc:
                return grader_error(str(exc), reply.text, tokens, **meta)
        questions.append(reply.text)
    query_vec, err, used = await grader.embed(embedder, query)
    tokens.add(used)
    if err or not query_vec:
        return grader_error(err or "No embedding", None, tokens, **meta)
    scored = []
    total = 0.0
    for question in questions:
        vec, err, used = await grader.embed(embedder, question)
        tokens.add(used)
        if err or not vec:
            return grader_error(err or "No embedding", None, tokens, **meta)
        similarity = _cosine(query_vec, vec)
        scored.append({"question": question, "similarity": similarity})
        total += similarity
    similarity = total / len(scored)
    extra: dict = {}
    score = similarity
    if ragas:  # RAGAS: cosine mean × int(not all noncommittal), so one committal question keeps the mean
        for q, flag in zip(scored, flags):
            q["noncommittal"] = flag
        extra["noncommittal"] = all(flags)
        score = 0.0 if all(flags) else similarity
    passed = score >= threshold - EPSILON
    relation = "greater" if passed else "less"
    said = " (the answer is noncommittal: RAGAS scores it 0)" if extra.get("noncommittal") else ""
    return GradingResult(passed, score, f"Relevance {_fixed(score)} is {relation} than threshold "
                                        f"{_num(threshold)}{said}", tokens_used=tokens,
                         metadata={**meta, "generatedQuestions": scored, "averageSimilarity": similarity,
                                   "threshold": threshold, **extra})


# ---------------------------------------------------------------- context-faithfulness


def _faithfulness_prompts(ctx: AssertionContext) -> tuple[Any, Any]:
    return step_prompts(ctx, prompts.CONTEXT_FAITHFULNESS_STATEMENTS, prompts.CONTEXT_FAITHFULNESS_VERDICTS)


def step_prompts(ctx: AssertionContext, statements_default: Any, verdicts_default: Any) -> tuple[Any, Any]:
    """A two-step type's prompts (statements, then verdicts): `rubricPrompt` is the list of the two, as
    promptfoo's context-faithfulness reads it (an item left out or empty keeps the default)."""
    custom = ctx.rubric(None)
    if custom is None:
        return statements_default, verdicts_default
    if not isinstance(custom, list):
        raise AssertionError_("rubricPrompt must be an array")

    def item(i: int, default):
        value = custom[i] if i < len(custom) else None
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str) and value.startswith("file://"):
            base_dir = getattr(ctx.grader, "base_dir", None)
            value = load_rubric_prompt(value, base_dir, where=f"rubricPrompt[{i}]")
        return value if value else default

    return item(0, statements_default), item(1, verdicts_default)


def read_question(text: str) -> str:
    """The answer-relevance step's text form (its `protocol`): one question alone, on one line ending
    in `?` (the prompt asks for no preamble); promptfoo embeds whatever the judge wrote, so a sentence
    of prose would be scored as a question."""
    lines = split_lines(text)
    if len(lines) != 1 or not js_trim(lines[0]).endswith("?"):
        raise ReplyError(f"answer-relevance: the grader's reply is not one question on one line ending in '?': "
                         f"{js_trim(text)[:120]!r}")
    return text


def verdict_counts(text: str) -> tuple[int, int]:
    """(yes, no): the verdicts of a faithfulness reply, as promptfoo reads them: the entries after
    `Final verdict for each statement in order:` (one is yes if it contains "yes"), else the counts of
    `verdict: yes` and `verdict: no`. ReplyError when there are none (the step's `protocol` too)."""
    verdicts = js_trim(text.lower())
    if FINAL_VERDICTS in verdicts:
        tail = verdicts[verdicts.index(FINAL_VERDICTS) + len(FINAL_VERDICTS):]
        parsed = [v for v in tail.split(".") if js_trim(v)]
        yes = sum(1 for v in parsed if "yes" in v)
        no = len(parsed) - yes
    else:
        no, yes = verdicts.count("verdict: no"), verdicts.count("verdict: yes")
    if yes + no == 0:
        raise ReplyError(NO_VERDICTS)
    return yes, no


def faithfulness_score(verdict_text: str, statements: int) -> float | None:
    """Share of supported statements (a missing verdict counts as unsupported); None when the reply
    has no verdict to read."""
    if statements <= 0:
        return None
    try:
        yes, no = verdict_counts(verdict_text)
    except ReplyError:
        return None
    unsupported = no + max(0, statements - no - yes)
    return min(1.0, max(0.0, 1 - unsupported / statements))


@assertion("context-faithfulness", model_graded=True)
async def context_faithfulness(ctx: AssertionContext) -> GradingResult:
    query = _require_query(ctx, "context-faithfulness")
    if not isinstance(ctx.output, str):
        raise AssertionError_("context-faithfulness assertion requires string output from the provider")
    context = await resolve_context(ctx)
    threshold = _threshold(ctx)
    statements_prompt, verdicts_prompt = _faithfulness_prompts(ctx)
    grader = ctx.need_grader()
    spec = grader.spec_for(ctx.assertion, ctx.test)
    tokens = TokenUsage()
    meta: dict = {"context": context, "grader": spec.id}
    messages = render_grading_prompt(statements_prompt, {**ctx.vars, "question": query, "answer": _answer_text(ctx)})
    reply = await grader.complete(spec, messages, reply=STATEMENTS_REPLY,
                                  sent=Sent.of("answer", _answer_text(ctx), query, inputs=[ctx.vars]))
    tokens.add(reply.tokens)
    if reply.error or not reply.text:
        return grader_error(reply.error or "No output", reply.text, tokens, **meta)
    statements = split_lines(reply.text)
    meta["statements"] = statements
    reason_if_zero = f"Faithfulness 0.00 is < {_num(threshold)}"
    if not statements:
        return _unreadable("context-faithfulness", reason_if_zero, threshold, NO_STATEMENTS, reply.text, tokens,
                           **meta)
    messages = render_grading_prompt(verdicts_prompt, {**ctx.vars, "context": _context_text(context),
                                                       "statements": statements})
    reply = await grader.complete(spec, messages, reply=VERDICTS_REPLY,  # (its reasons: no placeholders)
                                  sent=Sent.of("context", _context_text(context), inputs=[ctx.vars, statements]))
    tokens.add(reply.tokens)
    if (reply.error and not reply.refused) or not reply.text:  # refused: no verdicts, read below as promptfoo
        return grader_error(reply.error or "No output", reply.text, tokens, **meta)
    score = faithfulness_score(reply.text, len(statements))
    if score is None:
        return _unreadable("context-faithfulness", reason_if_zero, threshold, NO_VERDICTS, reply.text, tokens, **meta)
    passed = score >= threshold - EPSILON
    meta["claims"] = faithfulness_claims(statements, reply.parsed, reply.text, context)  # which failed, and why
    return GradingResult(passed, score, f"Faithfulness {_fixed(score)} is {'>=' if passed else '<'} {_num(threshold)}",
                         tokens_used=tokens, metadata={**meta, "graderRaw": reply.text})


# ---------------------------------------------------------------- context-recall


def recall_attributions(reply_text: str) -> list[dict]:
    """The reply's tagged lines, each {sentence, attributed}; untagged lines are ignored."""
    attributed_token, not_token = ATTRIBUTED.lower(), NOT_ATTRIBUTED.lower()
    out = []
    for line in split_lines(reply_text):
        lower = line.lower()
        if attributed_token not in lower and not_token not in lower:
            continue
        m = _NUMBERED.match(line)
        sentence = js_trim(m.group(1)) if m else js_trim(line.split(".")[0])
        out.append({"sentence": sentence, "attributed": not_token not in lower and attributed_token in lower})
    return out


@assertion("context-recall", model_graded=True, needs_value=True)
async def context_recall(ctx: AssertionContext) -> GradingResult:
    if not isinstance(ctx.value, str):
        raise AssertionError_("context-recall assertion requires a string value (expected answer or fact to verify)")
    if not ctx.prompt:
        raise AssertionError_("context-recall assertion requires a prompt")
    context = await resolve_context(ctx, fallback=ctx.prompt)
    threshold = _threshold(ctx)
    grader = ctx.need_grader()
    spec = grader.spec_for(ctx.assertion, ctx.test)
    messages = render_grading_prompt(ctx.rubric(prompts.CONTEXT_RECALL),
                                     {**ctx.vars, "context": _context_text(context), "groundTruth": ctx.value})
    meta: dict = {"context": context, "renderedGradingPrompt": json.dumps(messages, ensure_ascii=False),
                  "grader": spec.id}
    reply = await grader.complete(spec, messages, reply=RECALL_REPLY,
                                  sent=Sent.of("expected answer", ctx.value, inputs=[ctx.vars, _context_text(context)]))
    if (reply.error and not reply.refused) or not reply.text:  # refused: no tags, read below as promptfoo
        return grader_error(reply.error or "No output", reply.text, reply.tokens, **meta)
    attributions = recall_attributions(reply.text)
    attributed = sum(1 for a in attributions if a["attributed"])
    score = attributed / len(attributions) if attributions else 0.0
    meta.update(sentenceAttributions=attributions, totalSentences=len(attributions),
                attributedSentences=attributed, score=score)
    if not attributions:
        return _unreadable("context-recall", f"Recall 0.00 is < {_num(threshold)}", threshold, UNTAGGED,
                           reply.text, reply.tokens, **meta)
    passed = score >= threshold - EPSILON
    meta["claims"] = recall_claims(attributions, reply.parsed, reply.text, context)
    return GradingResult(passed, score, f"Recall {_fixed(score)} is {'>=' if passed else '<'} {_num(threshold)}",
                         tokens_used=reply.tokens, metadata={**meta, "graderRaw": reply.text})


# ---------------------------------------------------------------- context-relevance


def relevance_counts(reply_text: str, context: str | list[str]) -> dict:
    """Relevant sentences over context units, as promptfoo counts them."""
    pre_segmented = isinstance(context, list) or len(split_lines(context)) > 1
    units = [c for c in context if js_trim(c)] if isinstance(context, list) else split_units(context)
    insufficient = INSUFFICIENT in reply_text
    extracted: list[str] = []
    if not insufficient:
        for sentence in (split_lines if pre_segmented else split_units)(reply_text):
            if sentence not in extracted:
                extracted.append(sentence)
    relevant = min(len(extracted), len(units))
    return {"extractedSentences": extracted, "totalContextUnits": len(units), "totalContextSentences": len(units),
            "contextUnits": units, "relevantSentenceCount": relevant, "insufficientInformation": insufficient,
            "score": relevant / len(units) if units else 0.0}


@assertion("context-relevance", model_graded=True)
async def context_relevance(ctx: AssertionContext) -> GradingResult:
    query = _require_query(ctx, "context-relevance")
    context = await resolve_context(ctx)
    threshold = _threshold(ctx)
    grader = ctx.need_grader()
    spec = grader.spec_for(ctx.assertion, ctx.test)
    messages = render_grading_prompt(ctx.rubric(prompts.CONTEXT_RELEVANCE),
                                     {"context": _context_text(context), "query": query})
    meta: dict = {"context": context, "renderedGradingPrompt": json.dumps(messages, ensure_ascii=False),
                  "grader": spec.id}
    reply = await grader.complete(spec, messages, reply=RELEVANCE_REPLY,
                                  sent=Sent.of("context", _context_text(context), inputs=[query]))
    blank = reply.refused and not js_trim(reply.text or "")  # nothing extracted: read below as promptfoo
    if (reply.error and not blank) or not reply.text:
        return grader_error(reply.error or "No output", reply.text, reply.tokens, **meta)
    counts = relevance_counts(reply.text, context)
    meta.update(counts)
    score = counts["score"]
    if not counts["insufficientInformation"] and not counts["extractedSentences"]:
        return _unreadable("context-relevance", f"Context relevance 0.00 is < {_num(threshold)}", threshold,
                           f"the grader's reply has no sentences and does not say {INSUFFICIENT}",
                           reply.text, reply.tokens, **meta)
    passed = score >= threshold - EPSILON
    return GradingResult(passed, score,
                         f"Context relevance {_fixed(score)} is {'>=' if passed else '<'} {_num(threshold)}",
                         tokens_used=reply.tokens, metadata={**meta, "graderRaw": reply.text})


# ---------------------------------------------------------------- conversation-relevance

DEFAULT_WINDOW = 5
DEFAULT_CONVERSATION_THRESHOLD = 0.5


def _as_message(role: str, turn: Any, key: str) -> dict:
    message = {"role": role}
    if isinstance(turn, dict) and key in turn:  # a missing side has no content, as in JSON.stringify
        value = turn[key]
        message["content"] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                                               separators=(",", ":"))
    return message


def conversation_messages(window: list) -> list[dict]:
    out = []
    for turn in window:
        out.append(_as_message("user", turn, "input"))
        out.append(_as_message("assistant", turn, "output"))
    return out


def read_verdict(text: str) -> tuple[bool, Any] | str:
    """-> (relevant, reason) or an error message."""
    objects = extract_json_objects(text)
    if not objects:
        return "Error parsing output: No JSON object found in response"
    verdict = objects[0].get("verdict")
    if verdict not in ("yes", "no"):
        return "Error parsing output: Conversation relevance grader returned an invalid verdict"
    return verdict == "yes", objects[0].get("reason")


def summary_reason(text: str) -> str | None:
    """The reason of a conversation-relevance summary, as promptfoo reads it: the first JSON object's
    `reason`, when truthy."""
    objects = extract_json_objects(text)
    if objects and _js_truthy(objects[0].get("reason")):
        return templating.js_string(objects[0]["reason"])
    return None


async def _window_verdict(ctx: AssertionContext, grader, spec, window: list) -> GradingResult:
    custom = ctx.rubric(None)
    if custom is not None:
        messages = render_grading_prompt(custom, {**ctx.vars, "messages": window})
    else:
        shown = json.dumps(conversation_messages(window), indent=2, ensure_ascii=False)
        messages = render_grading_prompt(prompts.CONVERSATION_RELEVANCE, {"conversation": shown})
    reply = await grader.complete(spec, messages, reply=WINDOW_REPLY)
    if reply.error or not reply.text:
        return grader_error(reply.error or "No output", reply.text, reply.tokens)
    read = read_verdict(reply.text)
    if isinstance(read, str):
        return grader_error(read, reply.text, reply.tokens)
    relevant, reason = read
    if not _js_truthy(reason):
        reason = f"Response {'is' if relevant else 'is not'} relevant to the conversation context"
    elif not isinstance(reason, str):
        reason = templating.js_string(reason)
    return GradingResult(relevant, 1.0 if relevant else 0.0, reason, tokens_used=reply.tokens,
                         metadata={"graderRaw": reply.text})


@assertion("conversation-relevance", model_graded=True)
async def conversation_relevance(ctx: AssertionContext) -> GradingResult:
    conversation = ctx.vars.get("_conversation")
    if isinstance(conversation, list) and conversation:
        turns = conversation
    elif _js_truthy(conversation) and not isinstance(conversation, list):
        raise AssertionError_("the _conversation var must be a list of {input, output} turns")
    else:
        if not ctx.prompt:
            raise AssertionError_("conversational-relevance assertion type must have a prompt")
        turns = [{"input": ctx.prompt, "output": ctx.output_text}]
    size = ctx.assertion.config.get("windowSize")
    size = int(size) if isinstance(size, (int, float)) and not isinstance(size, bool) and size >= 1 else DEFAULT_WINDOW
    threshold = _threshold(ctx, DEFAULT_CONVERSATION_THRESHOLD)
    grader = ctx.need_grader()
    spec = grader.spec_for(ctx.assertion, ctx.test)
    tokens = TokenUsage()
    relevant = 0
    irrelevancies: list = []
    windows = []
    for i in range(len(turns)):
        result = await _window_verdict(ctx, grader, spec, turns[max(0, i - size + 1):i + 1])
        tokens.add(result.tokens_used)
        if grader_errored(result):
            result.tokens_used = tokens
            result.metadata["window"] = i
            return result
        windows.append({"window": i, "relevant": result.passed, "reason": result.reason,
                        "graderRaw": result.metadata.get("graderRaw")})
        if result.passed:
            relevant += 1
        elif result.reason and result.reason != NOT_RELEVANT:
            irrelevancies.append(result.reason)
    total = len(windows)
    score = relevant / total if total else 0.0
    passed = (score >= threshold - EPSILON) != ctx.inverse
    reason = f"{relevant} out of {total} conversation windows were relevant"
    if irrelevancies and score < 1:
        messages = render_grading_prompt(prompts.CONVERSATION_RELEVANCE_REASON, {
            "score": _num(score), "irrelevancies": json.dumps(irrelevancies, indent=2, ensure_ascii=False)})
        reply = await grader.complete(spec, messages, reply=SUMMARY_REPLY)
        if not reply.error and reply.text:  # a failed summary only loses the summary
            tokens.add(reply.tokens)
            reason = summary_reason(reply.text) or reason
    return GradingResult(passed, 1 - score if ctx.inverse else score, reason, tokens_used=tokens,
                         metadata={"windows": windows, "windowSize": size, "grader": spec.id})
