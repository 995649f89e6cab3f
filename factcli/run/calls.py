"""Every model call, to a provider under test or to a grader, goes through Caller.call.

This is the one owner of: the response cache, de-duplication of identical in-flight requests,
the per-endpoint limits (run/limits.py: maxConcurrency, rpm, tpm, adaptive concurrency), the
per-attempt timeout, and retries (capped exponential backoff with jitter, honouring Retry-After).
401/403 abort the run; other failures come back as a response with `error` set.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import random
import time
from dataclasses import dataclass

from factcli import settings
from factcli.errors import AbortRun
from factcli.providers.base import (
    AUTH,
    CONTEXT,
    FATAL,
    RATE_LIMIT,
    TRANSIENT,
    Provider,
    ProviderCallError,
    RenderedPrompt,
)
from factcli.run.budget import Budget, budget_cap, output_cap, worst_cost
from factcli.run.cache import ResponseCache, cache_key
from factcli.run.limits import Limiters, estimate_tokens
from factcli.store.redact import scrub_text
from factcli.types import ProviderResponse


@dataclass
class RetryPolicy:
    max_retries: int = 4
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0
    retry_after_cap_s: float = 120.0
    timeout_s: float = 300.0

    @classmethod
    def from_env(cls, timeout_s: float | None = None) -> "RetryPolicy":
        return cls(
            max_retries=int(settings.env_float("FACTCLI_MAX_RETRIES", 4)),
            backoff_base_s=settings.env_float("FACTCLI_BACKOFF_MS", 1000) / 1000,
            backoff_cap_s=settings.env_float("FACTCLI_BACKOFF_CAP_MS", 30000) / 1000,
            timeout_s=timeout_s or settings.env_float("FACTCLI_TIMEOUT_MS", 300000) / 1000,
        )

    def backoff(self, attempt: int) -> float:
        # "full jitter": spreads retries of concurrent calls so they don't return in lockstep
        return random.uniform(0.5, 1.0) * min(self.backoff_cap_s, self.backoff_base_s * (2 ** attempt))


def _context_error(provider_id: str, context: dict, err: ProviderCallError) -> str:
    """What overflowed and what to change: a grader's reply is capped by its max_tokens, a model's by
    the prompt's length and its own cap."""
    if context.get("purpose") == "grader":
        fix = ("lower the grader's max_tokens (its provider config), shorten the rubric or the output it grades, "
               "or grade with a model that has a larger context")
        what = f"the grader {provider_id}"
    else:
        fix = "shorten the prompt, lower the provider's max_tokens, or use a model with a larger context"
        what = f"the prompt sent to {provider_id}"
    return f"{what} exceeded the model's context window (not retried): {err}. To fix: {fix}"


class Caller:
    def __init__(self, cache: ResponseCache | None, policy: RetryPolicy | None = None,
                 limiters: Limiters | None = None, budget: Budget | None = None):
        self.cache = cache
        self.policy = policy or RetryPolicy()
        self.limiters = limiters
        self.budget = budget
        self._inflight: dict[str, asyncio.Future] = {}
        self.retries = 0  # total retries made, reported with the run
        self.calls = 0  # requests actually sent

    async def call(self, provider: Provider, prompt: RenderedPrompt, *, repeat_idx: int = 0,
                   context: dict | None = None) -> ProviderResponse:
        context = dict(context or {})
        context.setdefault("timeout_s", self.policy.timeout_s)
        overrides = context.get("overrides") or {}
        if (self.budget is not None and provider.call_price is None
                and output_cap(provider.config or {}, overrides) is None):
            cap = budget_cap(provider)
            if cap is not None:  # a model whose output limit litellm does not know: a real bound on the cost
                context["overrides"] = {**overrides, "max_tokens": cap}
        key = self._key(provider, prompt, repeat_idx, context)
        if key is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return hit
        if key is None:
            return await self._attempts(provider, prompt, context)
        pending = self._inflight.get(key)
        if pending is not None:
            resp = copy.deepcopy(await asyncio.shield(pending))
            if resp.error is None:
                resp.cached = True
            return resp
        future = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            resp = await self._attempts(provider, prompt, context)
        except BaseException as exc:
            if not future.done():
                future.set_exception(exc)
                future.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            self._inflight.pop(key, None)
        if not future.done():
            future.set_result(resp)
        if readable(resp):
            self.cache.set(key, resp)
        return resp

    def _key(self, provider: Provider, prompt: RenderedPrompt, repeat_idx: int, context: dict) -> str | None:
        if self.cache is None or not provider.cacheable:
            return None
        return cache_key(provider.cache_identity(), prompt.messages, repeat_idx, context.get("overrides"),
                         prompt.config)

    def forget(self, provider: Provider, prompt: RenderedPrompt, *, repeat_idx: int = 0,
               context: dict | None = None) -> None:
        """Drop a cached reply its reader could not use (a grader's reply that is not a verdict), so
        that the next run asks again instead of repeating the failure for the cache's lifetime.
        `context` as given to `call`."""
        context = dict(context or {})
        overrides = context.get("overrides") or {}
        if (self.budget is not None and provider.call_price is None
                and output_cap(provider.config or {}, overrides) is None and budget_cap(provider) is not None):
            context["overrides"] = {**overrides, "max_tokens": budget_cap(provider)}
        key = self._key(provider, prompt, repeat_idx, context)
        if key is not None:
            self.cache.delete(key)


    async def _attempts(self, provider: Provider, prompt: RenderedPrompt, context: dict) -> ProviderResponse:
        policy = self.policy
        limiter = self.limiters.for_provider(provider) if self.limiters is not None else None
        tokens = 0
        if limiter is not None and limiter.tpm:
            tokens = estimate_tokens(prompt, {**(provider.config or {}), **(context.get("overrides") or {})})
        attempt = 0
        while True:
            start = time.perf_counter()
            worst = None
            if self.budget is not None:
                worst = worst_cost(provider, prompt.messages, context.get("overrides") or {}) or 0.0
                await self.budget.reserve(worst)  # BudgetReached: this call does not start
            try:
                paced = limiter is not None and not limiter.idle
                if limiter is not None and not paced:
                    limiter.note_start()
                async with limiter.slot(tokens) if paced else contextlib.nullcontext():
                    start = time.perf_counter()  # the wait for a slot is not the call's latency
                    self.calls += 1
                    async with asyncio.timeout(policy.timeout_s):
                        resp = await provider.call(prompt, context)
                if paced:
                    await limiter.succeeded()
                if worst is not None:
                    self.budget.settle(worst, resp.cost)
                    worst = None
                resp.latency_ms = round((time.perf_counter() - start) * 1000)
                resp.retries = attempt
                if resp.error:
                    resp.error = scrub_text(str(resp.error))
                return resp
            except TimeoutError:
                err = ProviderCallError(f"timed out after {policy.timeout_s:g} s", TRANSIENT)
            except ProviderCallError as exc:
                err = exc
            finally:
                if worst is not None:  # a call that failed is not billed
                    self.budget.settle(worst, 0.0)
            if limiter is not None and (err.kind == RATE_LIMIT or (err.status == 503 and err.retry_after is not None)):
                await limiter.throttled()
            if err.kind == CONTEXT:
                return ProviderResponse(error=scrub_text(_context_error(provider.id, context, err)), retries=attempt,
                                        latency_ms=round((time.perf_counter() - start) * 1000))
            if err.kind in (AUTH, FATAL):
                status = f" (HTTP {err.status})" if err.status else ""
                raise AbortRun(f"{provider.id} rejected the request{status}: {scrub_text(str(err))}")
            if err.kind in (RATE_LIMIT, TRANSIENT) and attempt < policy.max_retries:
                if err.retry_after is not None:
                    delay = min(err.retry_after, policy.retry_after_cap_s)
                else:
                    delay = policy.backoff(attempt)
                attempt += 1
                self.retries += 1
                await asyncio.sleep(delay)
                continue
            suffix = f" (after {attempt} retries)" if attempt else ""
            return ProviderResponse(error=scrub_text(str(err)) + suffix, retries=attempt,
                                    latency_ms=round((time.perf_counter() - start) * 1000))


def readable(resp: ProviderResponse) -> bool:
    """A reply worth keeping: no error and some output (an empty reply is a failure to ask again)."""
    return resp.error is None and resp.output not in (None, "", [], {})
