"""Every model call, to a provider under test or to a grader, goes through Caller.call, as a typed
request (providers/request.CallRequest) that this module adjusts with `dataclasses.replace` (its
timeout, the form its endpoint accepts, the parameters its endpoint refused, a grown reasoning budget,
a budget's reply cap) and the provider class translates (docs/architecture.md: how a grader call travels).

This is the one owner of: the response cache, de-duplication of identical in-flight requests,
the run's cap on calls in flight (`-j`: CallCap), the per-endpoint limits under it (run/calling/limits.py:
maxConcurrency, rpm, tpm, adaptive concurrency), the per-attempt timeout, and retries (capped
exponential backoff with jitter, honouring Retry-After).
401/403 abort the run; other failures come back as a response with `error` set. Each endpoint's
circuit breaker (run/calling/breaker.py) is told what every attempt and call came to; once it is open, calls to
that endpoint end at once (a retry's backoff included) with its error, and none is sent.

A call that timed out is retried once, not max_retries times: without streaming there is no telling
a queued request from a long generation, and a generation that outlived the timeout once will
usually do so again, occupying the server's slot each time. 429, 5xx and connection errors keep
their retries.

Structured output (a grader's request's `form`): a server that refuses the form asked for (HTTP 400
naming it) is asked again at once with a simpler form, json_schema -> json_object -> plain, and the
form that worked is remembered for that endpoint for the rest of the run (FormatMemory). Until an
endpoint has answered one structured request, its other structured requests wait for that one, so a
server that refuses the schema sees one refused request, not one per concurrent call.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import random
import time
from contextvars import ContextVar
from collections.abc import Callable
from dataclasses import dataclass, replace

from factcli import settings
from factcli.errors import AbortRun
from factcli.providers.base import (
    AUTH,
    CONTEXT,
    FATAL,
    FORMAT,
    PARAM,
    RATE_LIMIT,
    TIMEOUT,
    TRANSIENT,
    Provider,
    ProviderCallError,
    names_response_format,
)
from factcli.providers.request import FORMS, CallRequest
from factcli.run.calling import clock
from factcli.run.calling.breaker import Breaker, Breakers
from factcli.run.calling.budget import Budget, budget_cap, output_cap, reply_reserved, worst_cost
from factcli.run.calling.cache import ResponseCache, cache_key
from factcli.run.calling.limits import Limiters, estimate_tokens
from factcli.store.redact import scrub_text
from factcli.types import ProviderResponse, TokenUsage


_REFUSED = ProviderResponse(error="the server refused the response_format")  # a sentinel, never returned


@dataclass
class RetryPolicy:
    """How a call is retried: attempts, backoff, the longest Retry-After honoured, and the call's timeout."""

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


def _context_error(provider_id: str, request: CallRequest, err: ProviderCallError) -> str:
    """What overflowed and what to change: a grader's reply is capped by its max_tokens, a model's by
    the prompt's length and its own cap."""
    if request.purpose == "grader":
        fix = ("lower the grader's max_tokens (its provider config), shorten the rubric or the output it grades, "
               "or grade with a model that has a larger context")
        what = f"the grader {provider_id}"
    else:
        fix = "shorten the prompt, lower the provider's max_tokens, or use a model with a larger context"
        what = f"the prompt sent to {provider_id}"
    return f"{what} exceeded the model's context window (not retried): {err}. To fix: {fix}"


def _timeout_error(timeout_s: float, attempts: int) -> str:
    said = "twice (a timed-out call is retried once)" if attempts > 1 else "(not retried)"
    return (f"timed out after {timeout_s:g} s {said}; raise the limit with evaluateOptions.timeoutMs in the "
            "config or FACTCLI_TIMEOUT_MS (milliseconds), or give a grader a lower max_tokens")


class FormatMemory:
    """Per endpoint, the form of structured output its server accepts, learnt during one run."""

    def __init__(self):
        self.form: dict[str, str] = {}  # the form to send; absent: as the caller asked
        self.confirmed: set[str] = set()  # answered a structured request in its current form
        self.rejected: dict[str, int] = {}  # 400s naming response_format, per endpoint
        self._locks: dict[str, asyncio.Lock] = {}

    def apply(self, endpoint: str, request: CallRequest) -> CallRequest:
        """The request in the form this endpoint accepts (never a richer form than asked)."""
        asked, known = request.form, self.form.get(endpoint)
        if asked == "plain" or known is None or FORMS.index(known) <= FORMS.index(asked):
            return request
        return replace(request, form=known)

    def downgrade(self, endpoint: str, sent: str) -> None:
        self.rejected[endpoint] = self.rejected.get(endpoint, 0) + 1
        self.form[endpoint] = FORMS[FORMS.index(sent) + 1]
        self.confirmed.discard(endpoint)

    def notes(self) -> list[str]:
        """One line per endpoint that refused a form, for the run's warnings."""
        out = []
        for endpoint, n in self.rejected.items():
            form = self.form.get(endpoint, "json_schema")
            then = "with response_format json_object" if form == "json_object" else "without response_format"
            out.append(f"grader endpoint {endpoint} refused the reply's JSON schema ({n} request(s) answered 400); "
                       f"its grader calls went on {then}, so replies were not held to the schema "
                       "(docs/judges.md: when a server refuses the schema)")
        return out

    def lock(self, endpoint: str) -> asyncio.Lock:
        """Held while an endpoint's first structured request is under way."""
        return self._locks.setdefault(endpoint, asyncio.Lock())


class ParamMemory:
    """Per endpoint, the request parameters its server refused during one run (a 400 naming one: OpenAI's
    reasoning models refuse `max_tokens` and a `temperature` other than 1, some servers `seed`), and what
    is sent instead: learned from the first refusal, applied to every later call, so each refused
    parameter costs one request per endpoint for the whole run."""

    def __init__(self):
        self.learned: dict[str, dict[str, tuple]] = {}
        self.refused: dict[str, int] = {}

    def learn(self, endpoint: str, refusal: tuple | None, sent: dict | None) -> dict | None:
        """Remember a refusal of a request sent with the adaptations `sent`; the adaptations to ask again
        with, or None when asking again would repeat it. A call sent before another call learned the same
        refusal is asked again with what that one learned."""
        if not refusal:
            return None
        name, action, arg = refusal
        known = self.learned.setdefault(endpoint, {})
        self.refused[endpoint] = self.refused.get(endpoint, 0) + 1
        if name in known and (sent or {}).get(name) != known[name]:
            return dict(known)  # learned meanwhile by a call in flight beside this one
        if known.get(name) == (action, arg) or (name in known and known[name][0] == "drop"):
            return None
        known[name] = (action, arg)
        return dict(known)

    def notes(self) -> list[str]:
        """One line per endpoint that refused a parameter, for the run's warnings."""
        out = []
        for endpoint, known in self.learned.items():
            said = []
            for name, (action, arg) in known.items():
                said.append(f"{name} dropped" if action == "drop" else
                            f"{name} sent as {arg}" if action == "rename" else f"{name} sent as {arg!r}")
            out.append(f"endpoint {endpoint} refused {', '.join(known)} ({self.refused.get(endpoint, 0)} request(s) "
                       f"answered 400); its calls went on with {'; '.join(said)} (docs/judges.md: refused "
                       "parameters)")
        return out


class CallCap(asyncio.Semaphore):
    """The run's cap on calls in flight (`-j`, docs/commands.md): every request sent to a model, a grader,
    an embedding model or a search backend, the claim-level methods' inner calls included, holds a place
    while it is out, and only then: not while it waits for its endpoint's slot or spacing, a retry's
    backoff, a reply an identical call is fetching, or the budget. A place is held around one request and
    nothing else, never across an await of another call, so rows waiting for their calls (each holding
    one of the executor's -j workers) and calls waiting for a place cannot wait on each other in a circle.
    The claim-level methods' own concurrency settings bound one assertion's calls, under this cap.
    In-process providers (echo) answer without sending anything and take no place."""

    def __init__(self, size: int):
        super().__init__(max(1, size))


class Caller:
    def __init__(self, cache: ResponseCache | None, policy: RetryPolicy | None = None,
                 limiters: Limiters | None = None, budget: Budget | None = None, cap: int | None = None,
                 breakers: Breakers | None = None):
        self.cache = cache
        self.breakers = breakers
        self.cap = CallCap(cap) if cap else None
        self.policy = policy or RetryPolicy()
        self.limiters = limiters
        self.budget = budget
        self.formats = FormatMemory()
        self.params = ParamMemory()
        self._inflight: dict[str, asyncio.Future] = {}
        self.batches = None  # run/calling/batches.Batcher in batch mode: the calls of its providers go in batches
        self.retries = 0  # total retries made, reported with the run
        self.calls = 0  # requests actually sent

    async def call(self, provider: Provider, request: CallRequest, *,
                   accept: Callable[[ProviderResponse], bool] | None = None) -> ProviderResponse:
        """One call of `request` to `provider`. `accept`: the caller's reading rule (a grader step's
        reader), not part of the request: a reply it refuses is neither stored nor served from the cache."""
        if (accept is None and request.purpose == "model" and provider.in_process and self.budget is None
                and (self.cache is None or not provider.cacheable)):
            # an in-process provider (echo) called by a row, with no budget, cache or limit in force: nothing
            # to pace (such a provider is never throttled), time out (it awaits nothing: it is given the
            # request as made), retry (it raises no ProviderCallError) or keep: the call alone. Any other
            # call takes the general path below.
            limiter = self.limiters.for_provider(provider) if self.limiters is not None else None
            if limiter is None or limiter.idle:
                start = time.perf_counter()
                self.calls += 1
                return _answered(await provider.call(request), start, 0)
        if request.timeout_s is None:
            request = replace(request, timeout_s=self.policy.timeout_s)
        if (self.budget is not None and provider.call_price is None
                and output_cap(provider.config or {}, request) is None):
            cap = budget_cap(provider)
            if cap is not None:  # a model whose output limit litellm does not know: a real bound on the cost
                request = replace(request, max_tokens=cap)
        key = self._key(provider, request)
        if key is not None:
            hit = self.cache.get(key)
            if hit is not None:
                if accept is None or accept(hit):
                    _given(key)
                    return hit
                self.cache.delete(key)  # kept by an older factcli: its reader refuses it, ask again
        if key is None:
            if request.reasoning is not None or self.batches is not None:
                return await self._answer(provider, request)
            if request.form == "plain":  # _structured's first case, inline
                return await self._attempts(provider, request)
            return await self._structured(provider, request)
        pending = self._inflight.get(key)
        if pending is not None:
            resp = copy.deepcopy(await asyncio.shield(pending))
            if resp.error is None:
                resp.cached = True
                _given(key)
            return resp
        future = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            resp = await self._answer(provider, request)
        except BaseException as exc:
            if not future.done():
                future.set_exception(exc)
                future.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            self._inflight.pop(key, None)
        if not future.done():
            future.set_result(resp)
        if readable(resp) and (accept is None or accept(resp)) and _given(key):
            self.cache.set(key, resp)
        return resp

    async def _send(self, limiter, tokens: int, cap, provider: Provider, request: CallRequest,
                    sending: list) -> tuple[float, ProviderResponse]:
        """One request: its endpoint's turn (`limiter`: a paced endpoint's slot and spacing), its place under
        the run's cap, then the request (`sending` gets an item once it is sent) -> (when it was sent, reply)."""
        async with limiter.slot(tokens) if limiter is not None else contextlib.nullcontext():
            async with cap if cap is not None else contextlib.nullcontext():
                if limiter is not None:
                    await limiter.started(tokens)
                start = time.perf_counter()  # the wait for a slot is not the call's latency
                sending.append(start)
                self.calls += 1
                async with asyncio.timeout(self.policy.timeout_s):
                    return start, await provider.call(request)

    def sends_json(self, provider: Provider, request: CallRequest) -> bool:
        """Whether the request goes out asking for JSON (its endpoint has not refused every structured form
        this run): its reply is then held to its schema."""
        return (getattr(provider, "takes_schema", True) and not getattr(provider, "user_code", False)
                and self.formats.apply(provider.endpoint(), request).form != "plain")

    def given(self) -> "GivenReplies":
        """`with caller.given() as replies:` the cached replies served or stored inside (tasks started
        inside included), to drop again with replies.drop()."""
        return GivenReplies(self.cache)

    async def _answer(self, provider: Provider, request: CallRequest) -> ProviderResponse:
        """The call; for a reasoning grader with a budget (`request.reasoning`, set by scoring/grading) whose
        reply was cut off while it reasoned, asked once more with the reasoning budget doubled within the
        ceiling (providers/reasoning.py). Both calls' tokens and cost are the reply's;
        `metadata.reasoningBudget` is the budget of the call that answered."""
        resp = await self._structured(provider, request)
        info = request.reasoning
        if info is None or info.budget is None or resp.error is not None or resp.finish_reason != "length":
            return resp
        from factcli.providers.reasoning import ceiling

        bigger = info.grown(ceiling(provider))
        if bigger is None:
            resp.metadata = {**resp.metadata, "reasoningBudget": info.budget}
            return resp
        info = bigger
        again = await self._structured(provider, replace(request, reasoning=info))
        both = TokenUsage()
        both.add(resp.token_usage)
        both.add(again.token_usage)
        again.token_usage = both
        again.cost = None if again.cost is None or resp.cost is None else again.cost + resp.cost
        again.metadata = {**again.metadata, "reasoningBudget": info.budget, "reasoningRetried": True}
        return again

    async def _structured(self, provider: Provider, request: CallRequest) -> ProviderResponse:
        """The call, in the form of structured output its endpoint accepts (see the module's docstring)."""
        if self.batches is not None and self.batches.takes(provider):  # in a batch (run/calling/batches.py)
            resp = await self._batched(provider, request)
            if resp is not None:  # (None: a failed line asked again directly, batchRetry: direct)
                self.calls += 1
                return resp
        if request.form == "plain":
            return await self._attempts(provider, request)
        endpoint = provider.endpoint()
        if endpoint not in self.formats.confirmed:
            async with self.formats.lock(endpoint):
                if endpoint not in self.formats.confirmed:  # this call is the endpoint's probe
                    return await self._in_accepted_form(endpoint, provider, request)
        return await self._in_accepted_form(endpoint, provider, request)

    async def _batched(self, provider: Provider, request: CallRequest) -> ProviderResponse | None:
        """A call in a batch, held against the budget as a direct call is (its worst case at the batch
        price, reserved before its line is queued; settled at what its reply cost)."""
        if self.budget is None:
            return await self._in_batch_form(provider, request)
        worst = worst_cost(provider, request.prompt.messages, request, batch=True) or 0.0
        await self.budget.reserve(worst, lambda: reply_reserved(provider, request))  # BudgetReached: not queued
        resp = None
        try:
            resp = await self._in_batch_form(provider, request)
        finally:
            self.budget.settle(worst, resp.cost if resp is not None else 0.0)
        return resp

    async def _in_batch_form(self, provider: Provider, request: CallRequest):
        """A batched call in the form of structured output its endpoint accepts: a line refused for its
        response_format (a 400 naming it) is asked again in a simpler form, remembered as a direct call's
        refusal is (FormatMemory), without a probe first (a batch round per probe would cost hours)."""
        endpoint = provider.endpoint()
        while True:
            sent = request if request.form == "plain" else self.formats.apply(endpoint, request)
            form = sent.form
            resp = await self.batches.call(provider, sent)
            if (resp is None or form == "plain" or resp.error is None or "HTTP 400" not in resp.error
                    or not names_response_format(resp.error)):
                return resp
            if self.formats.form.get(endpoint, "json_schema") == form or FORMS.index(
                    self.formats.form[endpoint]) < FORMS.index(form):
                self.formats.downgrade(endpoint, form)  # (unless a line beside it learnt it meanwhile)

    async def _in_accepted_form(self, endpoint: str, provider: Provider, request: CallRequest) -> ProviderResponse:
        while True:
            sent = self.formats.apply(endpoint, request)
            resp = await self._attempts(provider, sent)
            if resp is not _REFUSED:
                # answered, or failed otherwise (a timeout, a 500): the form was not what the server
                # refused, and the calls waiting behind this one need not wait any longer
                self.formats.confirmed.add(endpoint)
                return resp
            self.formats.downgrade(endpoint, sent.form)

    def _key(self, provider: Provider, request: CallRequest) -> str | None:
        """The response cache's key: the provider's identity, the messages, the repeat, the request's
        parameters in the provider's terms (what the untyped overrides held, so keys made before the typed
        request still hit) and the prompt's own request parameters."""
        if self.cache is None or not provider.cacheable:
            return None
        return cache_key(provider.cache_identity(), request.prompt.messages, request.repeat_idx,
                         provider.parameters(request), request.prompt.config)

    async def _attempts(self, provider: Provider, request: CallRequest) -> ProviderResponse:
        if self.breakers is None or provider.in_process:  # an in-process provider has no endpoint to lose
            return await self._tries(provider, request, None)
        breaker = self.breakers.of(provider)
        if breaker.trip is not None:
            return ProviderResponse(error=scrub_text(breaker.trip.error()))
        breaker.pending += 1
        try:
            return await self._tries(provider, request, breaker)
        finally:
            breaker.pending -= 1

    async def _tries(self, provider: Provider, request: CallRequest, breaker: Breaker | None) -> ProviderResponse:
        policy = self.policy
        timeouts = 0
        limiter = self.limiters.for_provider(provider) if self.limiters is not None else None
        endpoint = provider.endpoint()
        cap = None if provider.in_process else self.cap
        if endpoint in self.params.learned:
            request = replace(request, adaptations=dict(self.params.learned[endpoint]))
        tokens = 0
        if limiter is not None and limiter.tpm:
            tokens = estimate_tokens(request.prompt, {**(provider.config or {}), **provider.parameters(request)})
        attempt = 0
        while True:
            if breaker is not None and breaker.trip is not None:  # opened while this call waited its turn
                return ProviderResponse(error=scrub_text(breaker.trip.error()), retries=attempt)
            start = time.perf_counter()
            worst = None
            if self.budget is not None:
                worst = worst_cost(provider, request.prompt.messages, request) or 0.0
                await self.budget.reserve(  # BudgetReached: this call does not start
                    worst, lambda: reply_reserved(provider, request))
            try:
                paced = limiter is not None and not limiter.idle
                if limiter is not None and not paced:
                    limiter.note_start()
                sending: list = []
                send = self._send(limiter if paced else None, tokens, cap, provider, request, sending)
                if paced and breaker is not None:  # a paced wait for its turn may be long: it ends if the breaker opens
                    sent = await breaker.unless_open(send, sending)
                    if sent is None:
                        return ProviderResponse(error=scrub_text(breaker.trip.error()), retries=attempt)
                else:
                    sent = await send
                start, resp = sent
                if paced:
                    await limiter.succeeded()
                if breaker is not None:
                    breaker.answered()
                if worst is not None:
                    self.budget.settle(worst, resp.cost)
                    worst = None
                return _answered(resp, start, attempt)
            except TimeoutError:
                err = ProviderCallError(f"timed out after {policy.timeout_s:g} s", TIMEOUT)
            except ProviderCallError as exc:
                err = exc
            finally:
                if worst is not None:  # a call that failed is not billed
                    self.budget.settle(worst, 0.0)
            if limiter is not None and (err.kind == RATE_LIMIT or (err.status == 503 and err.retry_after is not None)):
                await limiter.throttled()
            outage = breaker is not None and err.kind in (RATE_LIMIT, TRANSIENT)  # what the breaker counts
            if outage:
                breaker.attempt_failed(scrub_text(str(err)), err.unreachable)
            elif breaker is not None and err.kind not in (TIMEOUT,):
                breaker.answered()  # a reply (a 400, a refusal): the endpoint is there
            if err.kind == FORMAT and request.form != "plain":
                return _REFUSED  # not a failure of the call: _structured asks again in a simpler form
            if err.kind == PARAM:
                adapted = self.params.learn(endpoint, err.refusal, request.adaptations)
                if adapted is not None:
                    request = replace(request, adaptations=adapted)
                    continue  # not a retry: the same call without what the server refused
            if err.kind == TIMEOUT:
                timeouts += 1
                if timeouts > 1 or attempt >= policy.max_retries:
                    return ProviderResponse(error=scrub_text(_timeout_error(policy.timeout_s, timeouts)),
                                            retries=attempt,
                                            latency_ms=round((time.perf_counter() - start) * 1000))
            if err.kind == CONTEXT:
                return ProviderResponse(error=scrub_text(_context_error(provider.id, request, err)), retries=attempt,
                                        latency_ms=round((time.perf_counter() - start) * 1000))
            if err.kind in (AUTH, FATAL):
                status = f" (HTTP {err.status})" if err.status else ""
                raise AbortRun(f"{provider.id} rejected the request{status}: {scrub_text(str(err))}")
            if err.kind in (RATE_LIMIT, TRANSIENT, TIMEOUT) and attempt < policy.max_retries:
                if err.retry_after is not None:
                    delay = min(err.retry_after, policy.retry_after_cap_s)
                else:
                    delay = policy.backoff(attempt)
                attempt += 1
                self.retries += 1
                if breaker is None:
                    await clock.sleep(delay)
                elif await breaker.sleep(delay) or breaker.trip is not None:
                    return ProviderResponse(error=scrub_text(breaker.trip.error()), retries=attempt,
                                            latency_ms=round((time.perf_counter() - start) * 1000))
                continue
            if outage:
                breaker.call_failed()
            suffix = f" (after {attempt} retries)" if attempt else ""
            return ProviderResponse(error=scrub_text(str(err)) + suffix, retries=attempt,
                                    latency_ms=round((time.perf_counter() - start) * 1000))


def _answered(resp: ProviderResponse, start: float, attempt: int) -> ProviderResponse:
    """A reply as the attempt that got it leaves it: its latency, its retries, its error scrubbed."""
    resp.latency_ms = round((time.perf_counter() - start) * 1000)
    resp.retries = attempt
    if resp.error:
        resp.error = scrub_text(str(resp.error))
    return resp


# The response cache's rule for grader replies (issue 44), for every step of every method alike:
# - a reply its step's reader refuses (the caller's `accept`: a reply its JSON schema does not allow,
#   a reply cut off) is never stored, and never served: an older one found in the cache is dropped;
# - a grading that ends in a grader error keeps none of the replies it read (GivenReplies, which
#   scoring/scorer.run_assertion opens around every model-graded assertion): a reply that fits its
#   schema but that the step could not use (three verdicts for four claims) is asked again next run.
_GIVEN: ContextVar["GivenReplies | None"] = ContextVar("factcli_replies_given", default=None)


def _given(key: str) -> bool:
    """Note a reply served or stored in the current grading; False when that grading already failed
    (a call it left running answered afterwards: a step gathered with one that failed), so the
    reply is not stored."""
    given = _GIVEN.get()
    if given is None:
        return True
    if given.dropped:
        return False
    given.keys.add(key)
    return True


class GivenReplies:
    __slots__ = ("cache", "keys", "token", "dropped")

    def __init__(self, cache: ResponseCache | None):
        self.cache = cache
        self.keys: set = set()
        self.dropped = False

    def __enter__(self) -> "GivenReplies":
        self.token = _GIVEN.set(self)
        return self

    def __exit__(self, *exc) -> None:
        _GIVEN.reset(self.token)

    def drop(self) -> None:
        self.dropped = True
        if self.cache is not None:
            for key in self.keys:
                self.cache.delete(key)
        self.keys.clear()


def readable(resp: ProviderResponse) -> bool:
    """A reply worth keeping: no error and some output (an empty reply is a failure to ask again)."""
    return resp.error is None and resp.output not in (None, "", [], {})
