"""A hard budget (`--max-cost USD`, `evaluateOptions.maxCost`): before each call, the worst case of
the calls in flight and of this one is added to the money already spent; when the next call could
cross the budget, no more calls start. Calls in flight finish and are kept, and the run ends
interrupted, resumable with a larger budget.

A call's worst case is its price (litellm's bundled table) at the most tokens it can use:
- one token per character of its messages, which is more than any tokenizer makes of ordinary text;
- its reply cap. A call that has none is sent with `max_tokens` = DEFAULT_OUTPUT_CAP when a budget
  is set, so that the worst case is a real bound.
A model whose price is unknown cannot be budgeted: the run refuses to start instead of guessing. A service
priced by the request (a search API: Provider.call_price) costs that price, whatever it sends.
"""

from __future__ import annotations

from factcli.errors import AbortRun
from factcli.providers.pricing import cost as price

DEFAULT_OUTPUT_CAP = 4096
MESSAGE_OVERHEAD_TOKENS = 8  # role and separators of a chat message


class BudgetReached(AbortRun):
    """The next call could cross the budget: start no more calls. An AbortRun, so that it passes
    through scoring as a provider's 401 does; the executor stops taking steps on it."""


def output_cap(config: dict, overrides: dict) -> int | None:
    for source in (overrides, config):
        for key in ("max_tokens", "max_completion_tokens"):
            value = source.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                return int(value)
    return None


def worst_cost(provider, messages: list[dict], overrides: dict) -> float | None:
    """The most a call can cost, or None when its model's price is unknown."""
    if getattr(provider, "free", False):
        return 0.0
    if getattr(provider, "call_price", None) is not None:
        return provider.call_price
    model = getattr(provider, "price_model", None)
    if not model:
        return None
    prompt_tokens = sum(len(str(m.get("content") or "")) + MESSAGE_OVERHEAD_TOKENS for m in messages)
    cap = output_cap(provider.config or {}, overrides) or DEFAULT_OUTPUT_CAP
    return price(model, prompt_tokens, cap)


def unpriced(provider) -> bool:
    return not getattr(provider, "free", False) and getattr(provider, "call_price", None) is None and (
        not getattr(provider, "price_model", None) or price(provider.price_model, 1, 1) is None)


class Budget:
    def __init__(self, max_usd: float, spent: float = 0.0):
        self.max_usd = max_usd
        self.spent = spent  # known costs of finished calls (and of the rows a resumed run kept)
        self.reserved = 0.0  # worst cases of the calls in flight

    def reserve(self, worst: float) -> None:
        if self.spent + self.reserved + worst > self.max_usd:
            raise BudgetReached(f"the budget of ${self.max_usd:g} is reached: ${self.spent:.4f} spent, and the next "
                                f"call could cost up to ${worst:.4f} more")
        self.reserved += worst

    def settle(self, worst: float, actual: float | None) -> None:
        self.reserved -= worst
        self.spent += worst if actual is None else actual  # an unreported cost counts as its worst case
