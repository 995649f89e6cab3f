"""answer-relevance's RAGAS mode, `config.noncommittal: true` (RAGAS's ResponseRelevancy,
src/ragas/metrics/_answer_relevance.py): each of the three question-writing calls also says whether the
answer is noncommittal (evasive, vague: "I don't know"), and when all three do, the score is 0 (RAGAS's
`cosine mean × int(not all noncommittal)`). Without the option answer-relevance is promptfoo's.

The step's reply is JSON `{question, noncommittal: 0|1}` (its prompt, rag_prompts.ANSWER_RELEVANCE_
NONCOMMITTAL, asks for nothing else, so it has no text form). It is counted under the question step's
calls (`types` left empty): the same three calls, one reply or the other.
"""

from __future__ import annotations

from factcli.scoring.registry import AssertionContext, AssertionError_
from factcli.scoring.replies import Int, Obj, Reply, ReplyError, Text

NONCOMMITTAL_REPLY = Reply("answer_relevance_noncommittal", Obj(question=Text(), noncommittal=Int()), 256)


def _problem(a) -> str | None:
    flag = (a.config or {}).get("noncommittal", False)
    if isinstance(flag, bool):
        return None
    return f"answer-relevance: config.noncommittal must be true or false, got {flag!r}"


def preflight(a, base_dir, test=None) -> list[str]:
    """A noncommittal option that is not a boolean is found before any call."""
    problem = _problem(a)
    return [problem] if problem else []


def noncommittal_mode(ctx: AssertionContext) -> bool:
    """Whether this answer-relevance is RAGAS's (`config.noncommittal: true`)."""
    problem = _problem(ctx.assertion)
    if problem:
        raise AssertionError_(problem)
    return (ctx.assertion.config or {}).get("noncommittal", False)


def read_noncommittal(parsed: dict | None, text: str) -> tuple[str, int]:
    """(question, noncommittal 0/1) of a reply: the schema's reading, else (a server that refused the schema
    outright) the same reader over the judge's words; ReplyError otherwise."""
    got = parsed if parsed is not None else NONCOMMITTAL_REPLY.read(text)
    if got["noncommittal"] not in (0, 1):
        raise ReplyError(f"noncommittal must be 0 or 1, got {got['noncommittal']}")
    if not got["question"].strip():
        raise ReplyError("the judge wrote no question")
    return got["question"], got["noncommittal"]
