"""`simpleqa`: abstention-aware factuality, as SimpleQA (Wei et al., 2024) grades short answers.

The grader sorts each output into CORRECT, INCORRECT or NOT_ATTEMPTED against the gold answer
(`value`). A row passes only when CORRECT. An answer that declines or commits to nothing is not
attempted, so a model that says "I don't know" when unsure is not ranked with one that guesses
wrong. Per column the report gives the three rates (each with a Wilson 95% interval), correct given
attempted = correct / (correct + incorrect), and F, the harmonic mean of correct and correct given
attempted (the paper's single number).

The grader's reply is read as SimpleQA's is: a single letter, A (CORRECT), B (INCORRECT) or C
(NOT_ATTEMPTED). A JSON object {"grade": "A"|"B"|"C"|"CORRECT"|"INCORRECT"|"NOT_ATTEMPTED",
"reason": ...} is accepted too. Anything else is a grading error, never a silent pass or fail; its
row counts in none of the rates.

`profile: reference` grades as simple-evals does (REFERENCE_PROMPT, read_grade_as_reference): its
rules, and the first A, B or C of the reply, none counting as NOT_ATTEMPTED. A column with simpleqa
rows reports over those rows alone.

The prompt is ours, written from the paper's definitions:
- a hedged answer that names no single answer is not attempted;
- an answer that contains the gold answer but also a claim contradicting it is incorrect;
- extra information that does not contradict the gold answer does not make an answer incorrect.
"""

from __future__ import annotations

import json
import re

from factcli.methods import reports as method_reports
from factcli.methods.settings import MethodSettings
from factcli.scoring.grading import extract_json_objects, grader_error, render_grading_prompt
from factcli.scoring.outcome import meta_errored
from factcli.scoring.registry import AssertionContext, AssertionError_, assertion, lookup
from factcli.scoring.replies import Choice, Obj, Reply, ReplyError
from factcli.stats.intervals import wilson_interval
from factcli.types import GradingResult

METHOD = "simpleqa"
GRADES = {"A": "CORRECT", "B": "INCORRECT", "C": "NOT_ATTEMPTED"}

GRADER_PROMPT = """You grade an answer to a short factual question against the gold answer. Sort it into one grade.

A: CORRECT. The answer states the gold answer (in any wording, spelling, or with extra detail), and
nothing in it contradicts the gold answer. Hedging ("I think", "probably") is fine as long as it
commits to the gold answer. Numbers are correct when they match the gold answer to the precision the
question asks for.

B: INCORRECT. The answer commits to an answer that contradicts the gold answer, or states the gold
answer together with a claim that contradicts it, or lists several candidate answers of which any is
wrong. A partly right answer with a wrong claim is incorrect.

C: NOT_ATTEMPTED. The answer does not commit to an answer: it declines ("I don't know", "I cannot
answer"), asks for more information, or hedges without naming one answer. Leaving out the gold
answer without contradicting it is not attempted, not incorrect.

Question: {{question}}
Gold answer: {{gold}}
Answer to grade: {{output}}

Reply with the letter of the grade only: A, B or C."""

# profile: reference: simple-evals' grading rules, in factcli's words (its own template can be given as
# `rubricPrompt`); the reply is read as simple-evals reads it (read_grade_as_reference)
REFERENCE_PROMPT = """Grade an answer to a question against a gold target: CORRECT, INCORRECT or NOT_ATTEMPTED.

CORRECT: the answer contains the important information of the gold target and nothing that contradicts it.
Only meaning counts: capitalisation, punctuation, grammar, word order and small misspellings of names do
not matter. Hedging ("I think", "probably") is fine as long as the gold target is stated and nothing
contradicts it.

INCORRECT: the answer states something that contradicts the gold target, even with hedging. An answer
that offers several candidates is incorrect if any of them is wrong.

NOT_ATTEMPTED: the important information of the gold target is missing from the answer, and nothing in the
answer contradicts it (it declines, says it does not know, asks for more information, or talks around it).

Also:
- A number must be right to the last significant figure of the gold target: for a gold target of 4,200
  km, "4,200 km" and "about 4,150 km" are correct, "3,900 km" is incorrect, and "several thousand km" is
  not attempted.
- The gold target may hold more than the question asks for; the answer only needs what the question asks.
  For "In which city was Frida Kahlo born?" with gold target "Coyoacán, Mexico City", "Coyoacán" is correct.
- Parts of the gold target that the question makes obvious can be left out: for "Which planet did Cassini
  orbit?" with gold target "Saturn (the sixth planet)", "Saturn" is correct.
- Do not punish a correct answer for extra detail that does not contradict the gold target.

Question: {{question}}
Gold target: {{gold}}
Predicted answer: {{output}}

Grade the predicted answer: A for CORRECT, B for INCORRECT, C for NOT_ATTEMPTED. Reply with the letter only."""

# the text form the prompt asks for (a bare A, B or C; the grade's name, or JSON with a `grade`, read too)
GRADE_REPLY = Reply("simpleqa_grade", Obj(grade=Choice(*GRADES)), 64, types=(METHOD,), as_text=lambda v: v["grade"],
                    protocol=lambda t: graded(t))
NOT_A_GRADE = "the grader's reply is not a grade (A, B or C, or JSON with a 'grade')"
_LETTER = re.compile(r"^\W*([ABC])\W*$")
_WORD = re.compile(r"^\W*(CORRECT|INCORRECT|NOT[_ ]ATTEMPTED)\W*$", re.IGNORECASE)


def read_grade(text: str | None) -> tuple[str, str] | None:
    """-> (grade, reason) from a grader reply, or None when it is none of the accepted forms."""
    text = (text or "").strip()
    m = _LETTER.match(text)
    if m:
        return GRADES[m.group(1)], ""
    m = _WORD.match(text)
    if m:
        return m.group(1).upper().replace(" ", "_"), ""
    objects = extract_json_objects(text) if text.startswith("{") else []
    if len(objects) == 1 and isinstance(objects[0].get("grade"), str):
        grade = objects[0]["grade"].strip().upper()
        grade = GRADES.get(grade, grade)
        if grade in GRADES.values():
            reason = objects[0].get("reason")
            return grade, reason if isinstance(reason, str) else ""
    return None


def graded(text: str | None) -> tuple[str, str]:
    """read_grade, refusing with the step's message what is none of the forms (the step's `protocol`)."""
    read = read_grade(text)
    if read is None:
        raise ReplyError(NOT_A_GRADE)
    return read


def _question(ctx: AssertionContext) -> str:
    for key in ("question", "query", "input"):
        if isinstance(ctx.vars.get(key), str) and ctx.vars[key].strip():
            return ctx.vars[key]
    return ctx.prompt


_FIRST_LETTER = re.compile(r"(A|B|C)")


def read_grade_as_reference(text: str | None) -> tuple[str, bool]:
    """simple-evals' reading: the first capital A, B or C anywhere in the reply; none is C (NOT_ATTEMPTED).
    -> (grade, whether the reply had no letter)."""
    m = _FIRST_LETTER.search(text or "")
    return (GRADES[m.group(1)], False) if m else ("NOT_ATTEMPTED", True)


SETTINGS = MethodSettings(METHOD)  # the grading prompt is the assertion's rubricPrompt


@assertion(METHOD, model_graded=True, needs_value=True, settings=SETTINGS)
async def simpleqa(ctx: AssertionContext) -> GradingResult:
    gold = ctx.value
    if not isinstance(gold, (str, int, float)) or isinstance(gold, bool) or not str(gold).strip():
        raise AssertionError_("simpleqa assertion type must have the gold answer as its value")
    profile = SETTINGS.read(ctx.assertion.config).get("profile", "default")
    grader = ctx.need_grader()
    spec = grader.spec_for(ctx.assertion, ctx.test)
    template = ctx.rubric(REFERENCE_PROMPT if profile == "reference" else GRADER_PROMPT)
    messages = render_grading_prompt(template, {**ctx.vars, "question": _question(ctx), "gold": str(gold),
                                                "output": ctx.output_text})
    # the reference reads any reply (its first A, B or C): not held to the schema
    reply = await grader.complete(spec, messages, reply=GRADE_REPLY, strict=profile != "reference")
    meta = {"method": METHOD, "grader": spec.id, "profile": profile,
            "renderedGradingPrompt": json.dumps(messages, ensure_ascii=False)}
    if reply.error or (not reply.text and profile != "reference"):
        return grader_error(f"simpleqa: {reply.error or 'the grader gave no reply'}", reply.text, reply.tokens,
                            **meta)
    if profile == "reference":
        grade, unparsed = read_grade_as_reference(reply.text)
        if unparsed:
            meta["unparsed"] = True
        read = (grade, "no grade letter in the reply: counted as not attempted, as simple-evals does"
                if unparsed else "")
    else:
        try:
            read = graded(reply.text)
        except ReplyError as exc:
            return grader_error(f"simpleqa: {exc}", reply.text, reply.tokens, **meta)
    grade, reason = read
    passed = (grade == "CORRECT") != ctx.inverse
    described = {"CORRECT": "correct", "INCORRECT": "incorrect", "NOT_ATTEMPTED": "not attempted"}[grade]
    text = f"SimpleQA grade: {described}" + (f": {reason}" if reason else "")
    return GradingResult(passed, 1.0 if passed else 0.0, text, tokens_used=reply.tokens,
                         metadata={**meta, "grade": grade, "graderReason": reason, "graderRaw": reply.text,
                                   "graderCost": reply.cost})


def _rate(count: int, n: int) -> dict | None:
    ci = wilson_interval(count, n)  # never zero-width: 20 of 20 correct is [84%, 100%], not [100%, 100%]
    return None if ci is None else {"rate": ci["value"], "ci95": [ci["low"], ci["high"]], "count": count}


def _registered(type_name: str) -> str | None:
    """The name a type is registered under (model-graded-factuality is factuality's alias)."""
    kind = lookup(type_name)
    return kind.name if kind is not None else None


def select(grading: GradingResult) -> dict | None:
    """What the column's SimpleQA figures count: every simpleqa grading; a factuality grading that
    checked abstention (`config.abstain`): not attempted when the output abstained, else correct or
    incorrect as it passed; a factscore grading likewise (abstained: not attempted), once the column
    has one of the first two kinds."""
    meta = grading.metadata
    error = meta_errored(meta)
    if meta.get("method") == METHOD:
        return {"grade": meta.get("grade"), "graderError": error, "from": METHOD,
                "unparsed": bool(meta.get("unparsed"))}
    if meta.get("method") == "factscore" or (meta.get("abstained") is not None and grading.assertion is not None
                                            and _registered(grading.assertion.base_type) == "factuality"):
        grade = "NOT_ATTEMPTED" if meta.get("abstained") else ("CORRECT" if grading.passed else "INCORRECT")
        return {"grade": grade, "graderError": error and not meta.get("abstained"),
                "from": "factscore" if meta.get("method") == "factscore" else "factuality"}
    return None


def simpleqa_summary(metadatas: list[dict]) -> dict | None:
    """The column's SimpleQA figures over the rows the grader graded (grading errors apart). A column with
    `simpleqa` rows counts those alone: a factuality or factscore row is another measurement, and pooling
    it would give an F that is neither's; without them, the factuality rows that checked abstention
    (and factscore rows beside them) give the figures."""
    if not any(m.get("from", METHOD) in (METHOD, "factuality") for m in metadatas):
        return None  # factscore rows alone keep their own report
    counted = [m for m in metadatas if m.get("from", METHOD) == METHOD] or metadatas
    left_out: dict[str, int] = {}
    for m in metadatas:
        if m.get("from", METHOD) != METHOD and counted is not metadatas:
            left_out[m["from"]] = left_out.get(m["from"], 0) + 1
    grades = [m.get("grade") for m in counted if not meta_errored(m)]
    errors = sum(1 for m in counted if meta_errored(m))
    n = len(grades)
    correct, incorrect = grades.count("CORRECT"), grades.count("INCORRECT")
    not_attempted = grades.count("NOT_ATTEMPTED")
    attempted = correct + incorrect
    cga = correct / attempted if attempted else None
    c = correct / n if n else None
    if c is None or cga is None:
        f = None
    else:
        f = 0.0 if c + cga == 0 else 2 * c * cga / (c + cga)
    sources = {}
    for m in counted:
        sources[m.get("from", METHOD)] = sources.get(m.get("from", METHOD), 0) + 1
    unparsed = sum(1 for m in counted if m.get("unparsed") and not meta_errored(m))
    out = {"n": n, "gradingErrors": errors, "correct": _rate(correct, n), "incorrect": _rate(incorrect, n),
           "notAttempted": _rate(not_attempted, n), "correctGivenAttempted": cga, "f": f, "from": sources}
    if left_out:
        out["notCounted"] = left_out
    if unparsed:
        out["unparsed"] = unparsed
    return out


def format_simpleqa(s: dict) -> str:
    def pct(part: dict | None, margin: bool = False) -> str:
        if part is None:
            return "n/a"
        text = f"{part['rate'] * 100:.1f}%"
        if margin:
            low, high = part["ci95"]
            text += f" [{low * 100:.1f}, {high * 100:.1f}]"
        return text

    def plain(x: float | None) -> str:
        return "n/a" if x is None else f"{x * 100:.1f}%"

    line = (f"SimpleQA (n={s['n']}): correct {pct(s['correct'], True)}, incorrect {pct(s['incorrect'])}, "
            f"not attempted {pct(s['notAttempted'])}; correct given attempted {plain(s['correctGivenAttempted'])}, "
            f"F {plain(s['f'])}")
    if s.get("gradingErrors"):
        line += f"; {s['gradingErrors']} grading error{'s' if s['gradingErrors'] != 1 else ''} left out"
    others = {k: v for k, v in (s.get("from") or {}).items() if k != METHOD}
    if others:
        line += "; " + ", ".join(f"{v} {k} rows" for k, v in sorted(others.items())) + " included"
    if s.get("unparsed"):
        line += f"; {s['unparsed']} unparseable grades counted as not attempted (the reference's rule)"
    if s.get("notCounted"):
        line += ("; " + ", ".join(f"{v} {k} rows" for k, v in sorted(s["notCounted"].items()))
                 + " not counted (the figures are over simpleqa rows only)")
    return line


method_reports.register("simpleqa", METHOD, simpleqa_summary, format_simpleqa, select)
