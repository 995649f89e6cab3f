"""Which graders reason before they answer, and what a grader call to one carries.

A reasoning model spends hidden tokens out of the same output allowance as its visible reply: OpenAI's
o-series and gpt-5 family (`max_completion_tokens`), Claude with extended thinking (`max_tokens` covers
`thinking.budget_tokens`), Gemini's thinking models (`maxOutputTokens` covers the thoughts). Sent only a
step's reply cap (512 tokens for a verdict), such a grader reasons the cap away and answers nothing
(`finish_reason: length`). So a reasoning grader is sent a reasoning allowance on top of the cap, a low
effort (grading a short verdict needs little), and no temperature (OpenAI's reasoning models refuse any
but 1; Claude's thinking requires 1).

Whether a grader reasons: its config's `reasoning: true|false` first (a custom endpoint litellm's table
does not know), else litellm's bundled model table (`supports_reasoning`, read without importing
litellm), else OpenAI's naming (o1, o3, o4, gpt-5 but not gpt-5-chat). Claude reasons only when asked
(its config sets `reasoning: true`, `thinking` or `reasoning_effort`): without thinking it answers
without hidden tokens, at a lower price.

Which family a provider's model belongs to, and so which parameters carry its reasoning, is the
provider class's to say (`Provider.reasoning_style()`, `Provider.reasoning_parameters()`: OpenAIProvider
always OpenAI's; LiteLLMProvider by its model's vendor); this module holds the numbers and the rules
they share (`style_of`, `parameters`, `allowance`), and run/calling/caller grows a cut-off call's budget
(`request.Reasoning.grown` within `ceiling`).

Keys (the grader's provider config): `reasoning_effort` (default `low` for grading; a model that
refuses `low` is sent the lowest level it names, learned once in run/calling/caller), `reasoningBudget` (the
allowance in tokens, default by effort below), `reasoning`.
"""

from __future__ import annotations

import re

from factcli.providers import pricing

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
GRADING_EFFORT = "low"
# OpenAI-style allowance by effort: a cap, not a target (the model decides how much it reasons; only
# what it spends is billed), so room to spare costs nothing
ALLOWANCE = {"none": 512, "minimal": 1024, "low": 2048, "medium": 4096, "high": 8192, "xhigh": 16384}
# Claude and Gemini are given a thinking budget, which they tend to spend: the least that works
THINKING_BUDGET = {"none": 1024, "minimal": 1024, "low": 1024, "medium": 2048, "high": 4096, "xhigh": 8192}
THINKING_MIN = 1024  # Anthropic's least budget_tokens
CEILING = 32768  # the most a grader call is ever sent (reasoning and reply), below the model's own limit
_OPENAI_NAMES = re.compile(r"^(?:o[134](?:-|$)|gpt-5(?!-chat))")
KEY = "reasoningBudget"


def _table_says(model: str) -> bool:
    key = pricing.table_key(model)
    return bool(key and pricing._table()[key].get("supports_reasoning"))


def style_of(config: dict, family: str, price_model: str | None) -> str | None:
    """Whether a model of `family` reasons, by its config's `reasoning` flag, litellm's table or OpenAI's
    naming: its family, or None. A provider class answers with it (`Provider.reasoning_style()`)."""
    flag = config.get("reasoning")
    if flag is False:
        return None
    if flag is True:
        return family
    if family == "anthropic":  # thinking is off unless asked for
        return family if ("thinking" in config or "reasoning_effort" in config) else None
    model = str(price_model or "")
    if not model:
        return None
    if _table_says(model) or _OPENAI_NAMES.match(model.rsplit("/", 1)[-1].lower()):
        return family
    return None


def effort(provider) -> str:
    value = (getattr(provider, "config", None) or {}).get("reasoning_effort")
    return value if isinstance(value, str) and value in EFFORTS else GRADING_EFFORT


def allowance(provider, kind: str | None = None) -> int:
    """The reasoning tokens a grader call is allowed on top of its reply cap."""
    kind = kind or provider.reasoning_style()
    if kind is None:
        return 0
    config = getattr(provider, "config", None) or {}
    own = config.get(KEY)
    thinking = config.get("thinking")
    if isinstance(thinking, dict) and own is None:  # a budget the config gives Claude or Gemini itself
        own = thinking.get("budget_tokens")
    if isinstance(own, (int, float)) and not isinstance(own, bool) and own > 0:
        value = int(own)
    else:
        value = (THINKING_BUDGET if kind in ("anthropic", "gemini") else ALLOWANCE)[effort(provider)]
    return max(value, THINKING_MIN) if kind == "anthropic" else value


def ceiling(provider) -> int:
    limit = pricing.output_limit(getattr(provider, "price_model", None))
    return min(CEILING, limit) if limit else CEILING


def parameters(style: str, config: dict, reasoning, temperature=None, seed=None) -> dict:
    """A reasoning call's parameters in the `style` family's terms for a reply of `reasoning.cap` tokens
    after `reasoning.budget` reasoning tokens (None: the config's own cap and thinking stand, nothing of
    them is sent). Temperature and seed (the request's sampling) are left out where the family refuses
    them (a refusal of the rest is learned once per endpoint in run/calling/caller)."""
    budget, cap = reasoning.budget, reasoning.cap
    # Claude and Gemini: the budget is sent as litellm's `thinking`; a config's reasoning_effort (which
    # litellm would map to a budget of its own) has chosen that budget and is not sent beside it
    if style in ("anthropic", "gemini"):
        out: dict = {}
        if budget is not None:
            budget = max(budget, THINKING_MIN) if style == "anthropic" else budget
            out = {"max_tokens": budget + cap, "thinking": {"type": "enabled", "budget_tokens": budget}}
        out["reasoning_effort"] = None
        if style == "gemini":
            if temperature is not None:
                out["temperature"] = temperature
            if seed is not None:
                out["seed"] = seed
        return out
    out = {"max_completion_tokens": budget + cap} if budget is not None else {}
    if seed is not None:
        out["seed"] = seed
    if "reasoning_effort" not in config:
        out["reasoning_effort"] = GRADING_EFFORT
    return out
