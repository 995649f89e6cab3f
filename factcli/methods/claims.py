"""Shared machinery of the claim-level metrics (factual-correctness, factscore, facts-grounding, safe, citations).

One place for: asking a judge for JSON of a known shape, checking that a verdict list lines up
with the claims it judges, resolving a judge panel, and step prompts that users can override.
A reply of the wrong shape is a JudgeError (a grading error upstream), never a guess.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from factcli.scoring.content import Sent
from factcli.scoring.gather import gather_all
from factcli.scoring.grading import extract_json_objects, render_grading_prompt
from factcli.scoring.judges import JUDGE, Judge, JudgeProblem, judges_of, role_of
from factcli.types import ProviderSpec, TokenUsage


class JudgeError(Exception):
    """A judge call failed or its reply could not be used; `raw` keeps the reply."""

    def __init__(self, message: str, raw: str | None = None):
        super().__init__(message)
        self.raw = raw


@dataclass
class JudgeCall:
    """Tokens, cost and raw replies gathered across the calls of one metric evaluation."""

    tokens: TokenUsage = field(default_factory=TokenUsage)
    cost: float = 0.0
    cost_known: bool = True
    replies: list[dict] = field(default_factory=list)

    def merge(self, other: "JudgeCall") -> None:
        """Add a branch's calls: steps that run concurrently each keep their own JudgeCall, merged in
        the order of their items, so that the replies' order does not depend on which answered first
        (and `replies[-1]` is always the branch's own last reply)."""
        self.tokens.add(other.tokens)
        self.cost += other.cost
        self.cost_known = self.cost_known and other.cost_known
        self.replies.extend(other.replies)


async def gather_calls(call: JudgeCall, *steps: Callable[[JudgeCall], Awaitable[Any]]) -> list:
    """The steps (each a function of its own JudgeCall) run at once, merged into `call` in the steps'
    order, also when one fails. The first failure cancels the rest: the row is a grading error already
    (or the run is aborting), so its other steps would only spend calls."""
    subs = [JudgeCall() for _ in steps]
    try:
        return await gather_all(step(sub) for step, sub in zip(steps, subs))
    finally:
        for sub in subs:
            call.merge(sub)


def all_judges(ctx) -> list[Judge]:
    """Every judge of the assertion on this row (scoring/judges.judges_of: its panel, `provider:` as a list
    or `config.models`, else its one grader; then the method's own models, with their roles). A list that
    names no judge is a JudgeError; no grader at all is the ConfigError the checks before any call give."""
    try:
        return judges_of(ctx.assertion, ctx.test, ctx.grader.source)
    except JudgeProblem as exc:
        if exc.no_grader:
            raise
        raise JudgeError(exc.detail) from None


def judges_for(ctx, kind: str = "text") -> list[ProviderSpec]:
    """The judges that grade (a panel's members, else the one grader of `kind`), in order."""
    return role_of(all_judges(ctx), JUDGE, kind)


def step_prompt(ctx, key: str, default: Any) -> Any:
    """A step's prompt: `config.<key>` (inline text, chat messages, or already-loaded file://), else the default."""
    value = ctx.assertion.config.get(key)
    return default if value in (None, "", []) else value


async def ask_json(ctx, spec: ProviderSpec, template: Any, variables: dict, call: JudgeCall,
                   step: str, reply_shape: Any = None, items: int | None = None, attempt: int = 0,
                   sent: Any = None, cache_prefix: int = 0) -> dict:
    """Render the step prompt, call the judge (its reply constrained to `reply_shape`, a
    scoring.replies.Reply), return the first JSON object of its reply. `attempt` > 0: the step asks
    again (grading.Grader.complete). `sent` (a scoring.content.Sent): what the reply's content must
    judge; the prompt's variables are the texts filled into it. Without one, the reply is still checked
    for the prompt's placeholders (a reason `<why>` copied from the template is no judgment)."""
    messages = render_grading_prompt(template, variables)
    again: dict = {"attempt": attempt} if attempt else {}
    if reply_shape is not None:
        again["sent"] = (sent or Sent.of("prompt")).with_inputs(variables)
    if cache_prefix:
        again["cache_prefix"] = cache_prefix
    reply = await ctx.grader.complete(spec, messages, reply=reply_shape, json_mode=reply_shape is None, items=items,
                                      **again)
    call.tokens.add(reply.tokens)
    if reply.cost is None:
        call.cost_known = False
    else:
        call.cost += reply.cost
    call.replies.append({"judge": spec.id, "step": step, "reply": reply.text})
    if reply.error:
        raise JudgeError(f"{step}: {reply.error}", reply.text)
    if reply.parsed is not None:
        return reply.parsed
    if isinstance(reply.output, dict):
        return reply.output
    objects = extract_json_objects(reply.text or "")
    if not objects:
        raise JudgeError(f"{step}: the judge's reply has no JSON object", reply.text)
    return objects[0]


def string_list(obj: dict, key: str, step: str, raw: str | None = None) -> list[str]:
    value = obj.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise JudgeError(f"{step}: expected {{\"{key}\": [strings]}}, got {json.dumps(obj)[:200]}", raw)
    return [v.strip() for v in value if v.strip()]


def aligned_verdicts(obj: dict, items: list[str], allowed: dict[str, str], step: str,
                     key: str = "verdicts") -> list[dict]:
    """The judge's per-item verdicts, one per item, in order; anything else is a JudgeError.

    `allowed` maps accepted spellings (upper-cased) to canonical verdicts, e.g. {"TRUE": "SUPPORTED"}.
    """
    verdicts = obj.get(key)
    if not isinstance(verdicts, list):
        raise JudgeError(f"{step}: expected {{\"{key}\": [...]}}, got {json.dumps(obj)[:200]}")
    if len(verdicts) != len(items):
        raise JudgeError(f"{step}: {len(verdicts)} verdicts for {len(items)} items")
    out = []
    for i, (item, v) in enumerate(zip(items, verdicts)):
        if not isinstance(v, dict):
            raise JudgeError(f"{step}: verdict {i + 1} is not an object")
        raw_verdict = v.get("verdict")
        if isinstance(raw_verdict, bool):
            raw_verdict = "TRUE" if raw_verdict else "FALSE"
        canonical = allowed.get(str(raw_verdict).strip().upper()) if raw_verdict is not None else None
        if canonical is None:
            raise JudgeError(f"{step}: verdict {i + 1} is {raw_verdict!r}, expected one of "
                             f"{sorted(set(allowed.values()))}")
        reason = v.get("reason")
        out.append({"text": item, "verdict": canonical, "reason": reason if isinstance(reason, str) else ""})
    return out


# FActScore's bio-mode preamble rules (atomic_facts.py, `is_bio = True`), which SAFE's splitter inherits
# (third_party/factscore): a sentence starting with one of these gives no facts, and neither does a first
# sentence starting with "Here are"
PREAMBLE_STARTS = ("Sure", "Please", "This sentence does not contain any facts")
FIRST_PREAMBLE_STARTS = ("Here are",)


def without_preambles(sentences: list[str], first: tuple[str, ...] = FIRST_PREAMBLE_STARTS) -> list[str]:
    """The sentences that can state facts: FActScore's preambles left out (`first`: the starts that make
    the first sentence a preamble)."""
    return [s for i, s in enumerate(sentences) if not (s.startswith(PREAMBLE_STARTS) or (i == 0 and s.startswith(first)))]


def numbered(items: list[str]) -> str:
    return "\n".join(f"{i + 1}. {text}" for i, text in enumerate(items))


# ---------------------------------------------------------------- additions (facts-grounding)


def prompt_for(ctx, key: str, default: Any) -> Any:
    """`step_prompt`, with a `file://` value read from disk (relative to the config's folder):
    .json/.yaml files hold chat messages, any other file is the prompt text."""
    value = step_prompt(ctx, key, default)
    if isinstance(value, str) and value.startswith("file://"):
        from factcli.scoring.grading import load_rubric_prompt

        base = getattr(getattr(ctx, "grader", None), "base_dir", None)
        value = load_rubric_prompt(value, base, "", f"config.{key}")
    return value


async def ask_text(ctx, spec: ProviderSpec, template: Any, variables: dict, call: JudgeCall, step: str,
                   reply_shape: Any = None, cache_prefix: int = 0) -> str:
    """Render the step prompt, call the judge (its reply constrained to `reply_shape`, whose text form
    is returned when the reply fits it), and return the reply text, read by the step's text parser.
    A failed call or an empty reply is a JudgeError. `cache_prefix`: see `shared_lead`."""
    messages = render_grading_prompt(template, variables)
    reply = await ctx.grader.complete(spec, messages, reply=reply_shape, cache_prefix=cache_prefix)
    call.tokens.add(reply.tokens)
    if reply.cost is None:
        call.cost_known = False
    else:
        call.cost += reply.cost
    call.replies.append({"judge": spec.label or spec.id, "step": step, "reply": reply.text})
    if reply.error:
        raise JudgeError(f"{step}: {reply.error}", reply.text)
    if not (reply.text or "").strip():
        raise JudgeError(f"{step}: the judge's reply is empty", reply.text)
    return reply.text


# ---------------------------------------------------------------- prompt caching (issue 50)


def shared_lead(template: Any, variables: list[dict]) -> tuple[int, list[dict] | None]:
    """How many leading messages a step's calls (one a variable set) have in common, and the first call's
    messages: the static part a vendor may cache (providers/prompt_cache.py), which every call but the
    last message shares. 0 for a single call (a cache entry written for one call is only paid for, 1.25x
    at Anthropic) or when the prompt is one message. The first and the last calls are compared: a step's
    varying part is the same variables in each."""
    if len(variables) < 2:
        return 0, None
    first = render_grading_prompt(template, variables[0])
    last = render_grading_prompt(template, variables[-1])
    same = 0
    while same < min(len(first), len(last)) - 1 and first[same] == last[same]:
        same += 1
    return same, first


async def warmed(calls: list[Callable[[], Awaitable[Any]]], warm: bool,
                 gather: Callable[[list], Awaitable[list]] = gather_all) -> list:
    """The calls' results in order (`gather`: how the step runs calls at once). `warm`: the first call is
    made alone before the others, so that its prefix is in the vendor's cache when they are sent
    (Anthropic: "a cache entry only becomes available after the first response begins"; calls sent at
    once all miss, and each writes the entry again). providers/prompt_cache.worth_warming says when."""
    if not warm or len(calls) < 2:
        return await gather([call() for call in calls])
    first = await calls[0]()
    return [first, *await gather([call() for call in calls[1:]])]
