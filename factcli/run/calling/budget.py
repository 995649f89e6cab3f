"""A hard budget (`--max-cost USD`, `evaluateOptions.maxCost`): before each call, the worst case of
the calls in flight and of this one is added to the money already spent; when the next call could
cross the budget, no more calls start. Calls in flight finish and are kept, and the run ends
interrupted, resumable with a larger budget.

A call's worst case is its price (providers/pricing.price_of: a price by hand, a local model's
nothing, or litellm's bundled table; the batch price for a call that goes through a batch API) at
the most tokens it can use, each input token at the dearer of the input and cache-write prices (a
call may write all it sends to the provider's cache):
- one token per character of its messages, which is more than any tokenizer makes of ordinary text;
- its reply cap: the request's own `max_tokens`, else the model's output limit from litellm's table
  (a model cannot reply longer). A model whose limit the table does not know is sent with
  `max_tokens` = FALLBACK_OUTPUT_CAP when a budget is set, so that the worst case is a real bound.
A model whose price is unknown cannot be budgeted: the run refuses to start instead of guessing,
and says which key would price it. A service priced by the request (a search API:
Provider.call_price) costs that price, whatever it sends.
"""

from __future__ import annotations

from factcli.errors import AbortRun
from factcli.providers.pricing import output_limit, price_of

FALLBACK_OUTPUT_CAP = 4096
MESSAGE_OVERHEAD_TOKENS = 8  # role and separators of a chat message


class BudgetReached(AbortRun):
    """The next call could cross the budget: start no more calls. An AbortRun, so that it passes
    through scoring as a provider's 401 does; the executor stops taking steps on it."""


def output_cap(config: dict, request=None) -> int | None:
    """The most output tokens a call can take by what it is sent: the request's own allowance
    (providers/request.CallRequest.reply_allowance: a grader's cap, with its reasoning budget), else the
    provider config's max_tokens / max_completion_tokens; None when neither caps it."""
    own = request.reply_allowance() if request is not None else None
    if isinstance(own, int) and own > 0:
        return own
    for key in ("max_tokens", "max_completion_tokens"):
        value = config.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return int(value)
    return None


def budget_cap(provider) -> int | None:
    """The `max_tokens` a budgeted call without a cap of its own is sent with: none when the model's
    own output limit bounds its reply, else FALLBACK_OUTPUT_CAP."""
    return None if output_limit(getattr(provider, "price_model", None)) else FALLBACK_OUTPUT_CAP


def reply_cap(provider, request=None) -> int:
    """The most tokens a call's reply can take: its request's cap, else the model's output limit."""
    return (output_cap(provider.config or {}, request) or output_limit(getattr(provider, "price_model", None))
            or FALLBACK_OUTPUT_CAP)


def reply_reserved(provider, request=None) -> str | None:
    """What a call's worst case reserves for its reply and why, for the stop message: a budget that
    stops a cheap run early is usually the reply cap of a model without max_tokens (16,384 tokens for
    gpt-4o-mini), and the user must be told which knob that is."""
    if getattr(provider, "call_price", None) is not None:
        return None  # priced by the request: no reply to reserve
    own = output_cap(provider.config or {}, request)
    name = getattr(provider, "price_model", None) or provider.id
    if own is not None:
        return f"each reply is reserved at its max_tokens of {own:,} tokens; a lower max_tokens reserves less"
    limit = output_limit(getattr(provider, "price_model", None))
    if limit:
        return (f"each reply of {name} is reserved at {limit:,} tokens, the model's output limit, as max_tokens "
                f"is not set; set max_tokens in the provider's config (e.g. max_tokens: 1024) to reserve less")
    return (f"each reply of {name} is reserved at {FALLBACK_OUTPUT_CAP:,} tokens, the max_tokens factcli sends "
            "when a budget is set and the model's output limit is unknown; set max_tokens lower to reserve less")


def worst_cost(provider, messages: list[dict], request=None, batch: bool = False) -> float | None:
    """The most a call of `request` (a providers/request.CallRequest; None: a call with no cap of its own)
    can cost (batch: sent through a batch API, at its price), or None when its model's price is unknown."""
    if getattr(provider, "call_price", None) is not None:
        return provider.call_price
    price = price_of(provider)
    if price is None:
        return None
    if not price.input and not price.output:
        return 0.0
    prompt_tokens = sum(len(str(m.get("content") or "")) + MESSAGE_OVERHEAD_TOKENS for m in messages)
    return prompt_tokens * price.worst_input(batch) + price.cost(0, reply_cap(provider, request), batch)


def unpriced(provider) -> bool:
    return getattr(provider, "call_price", None) is None and price_of(provider) is None


def _money(value: float) -> str:
    from factcli.report.figures import money

    return money(round(max(value, 0.0), 12))  # no "-0" from float sums of reservations


class Budget:
    """Money spent and reserved. A call that would fit once the calls in flight settle waits for
    them (they usually cost far less than their worst case); a call that cannot fit even then
    stops the run."""

    def __init__(self, max_usd: float, spent: float = 0.0):
        self.max_usd = max_usd
        self.spent = spent  # known costs of finished calls (and of the rows a resumed run kept)
        self.reserved = 0.0  # worst cases of the calls in flight
        self.in_flight = 0
        self._settled = None  # asyncio.Condition, made in the run's loop

    def _stop(self, worst: float, reply: str | None = None) -> BudgetReached:
        flight = (f"{_money(self.reserved)} reserved for the {self.in_flight} call"
                  f"{'s' if self.in_flight != 1 else ''} in flight")
        return BudgetReached(
            f"the budget of ${self.max_usd:g} is reached: {_money(self.spent)} spent + {flight} + "
            f"{_money(worst)} for the next call at its worst case = {_money(self.spent + self.reserved + worst)}, "
            f"more than ${self.max_usd:g}" + (f" ({reply})" if reply else ""))

    def try_reserve(self, worst: float, reply=None) -> bool:
        """Reserve now if it fits; False if it would fit only after calls in flight settle. `reply`: a
        callable saying what the worst case reserves for the reply (reply_reserved), for the stop message."""
        if self.spent + worst > self.max_usd or (self.in_flight == 0 and self.spent + self.reserved + worst
                                                 > self.max_usd):
            raise self._stop(worst, reply() if reply is not None else None)
        if self.spent + self.reserved + worst > self.max_usd:
            return False
        self.reserved += worst
        self.in_flight += 1
        return True

    async def reserve(self, worst: float, reply=None) -> None:
        import asyncio

        if self._settled is None:
            self._settled = asyncio.Condition()
        async with self._settled:
            while not self.try_reserve(worst, reply):
                await self._settled.wait()

    def settle(self, worst: float, actual: float | None) -> None:
        self.reserved -= worst
        self.in_flight -= 1
        self.spent += worst if actual is None else actual  # an unreported cost counts as its worst case
        if self._settled is not None:
            import asyncio

            async def wake():
                async with self._settled:
                    self._settled.notify_all()

            asyncio.get_running_loop().create_task(wake())
