"""Batch mode (`--batch`, `evaluateOptions.batch`, a provider's `batch: true`): the one owner of batching.

run/calling/caller.Caller hands every call of a provider that has a batch API (one with `batch_body`,
`batch_client` and `batch_reply`: providers/openai_provider.py) here instead of sending it. Its line
waits in its endpoint's queue; a queue is submitted as one batch once it stops growing for a quiet
window (QUIET_S on run/calling/clock) or reaches the vendor's limits (lines, bytes), so all rows of a stage
go in as few batches as the limits allow. In batch mode the executor lets every row be in flight
(run/runner.execute): a batched call holds no place under -j, so the calls of one stage of every
row meet in the same batch, and a multi-stage method (a claim-level method's decomposition, then its
verification) takes one batch round per stage.

Each submitted batch is polled with backoff on run/calling/clock until it ends; its replies are read by the
provider's own reader (`batch_reply`, the reader of its direct replies) and priced at the batch
price. The response cache's rule is Caller's: a batched reply comes back through Caller.call.

A line that failed is asked again in the next batch (`evaluateOptions.batchRetry: batch`, the
default) or directly (`direct`), up to MAX_TRIES times in all; an expired or cancelled line is
submitted again. A line's custom_id is a hash of its endpoint and request (with a count for the same
request made again, and `_rN` for its Nth retry): with the run's journal (the store's record of its
batches, store/batches.py), `--resume` collects a line from the batch it was submitted in and never
submits a custom_id already in a stored batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import uuid
from contextvars import ContextVar
from typing import Callable

from factcli.providers.batch_api import ENDED, BatchState, LineResult
from factcli.run.calling import clock
from factcli.types import ProviderResponse

_ROW: ContextVar[list | None] = ContextVar("factcli_batch_row", default=None)  # [the row's latest round]

QUIET_S = 2.0  # a queue that has not grown for this long is submitted (FACTCLI_BATCH_QUIET_MS)
# a batch's polls: the first after POLL_S (FACTCLI_BATCH_POLL_MS), each next one POLL_GROWTH times later, up to POLL_CAP_S
POLL_S, POLL_GROWTH, POLL_CAP_S = 1.0, 1.5, 60.0
POLL_PATIENCE = 30  # polls in a row that could not read a batch (after the SDK's own retries) before its lines fail
MAX_TRIES = 3  # a line submitted this many times in all, then its error is the call's
RETRIES = ("batch", "direct")
PENDING = "pending-"  # the made-up id of a batch recorded before the vendor had it (Journal.intent)


def batch_capable(provider) -> bool:
    """A provider class with a batch API says so (`batch_api`: "openai", "anthropic") and builds its lines."""
    return getattr(provider, "batch_api", None) is not None and all(
        callable(getattr(provider, name, None)) for name in ("batch_body", "batch_client", "batch_reply"))


def wanted(provider, run_default: bool) -> bool:
    """Whether a provider's calls go in batches: its config's `batch: true|false`, else the run's."""
    flag = (getattr(provider, "config", None) or {}).get("batch")
    return (run_default if flag is None else flag is True) and batch_capable(provider)


class Journal:
    """Where a run's batches are recorded (the store: store/batches.BatchJournal); this one forgets."""

    def lines(self) -> dict[str, str]:
        """custom_id -> batch id of every line submitted by this run before (a resumed run)."""
        return {}

    def batches(self) -> dict[str, dict]:
        """batch id -> {kind, endpoint, round, status, ...} of every stored batch."""
        return {}

    def intent(self, pending: str, kind: str, endpoint: str, round_: int, custom_ids: list[str],
               base_url: str | None = None) -> None:
        """A batch about to be submitted, under a made-up id (PENDING + its tag): recorded before the vendor
        has it, so that a run killed in between finds it again (BatchClient.find) rather than submitting
        its lines twice."""

    def adopt(self, pending: str, batch_id: str) -> None:
        """The vendor has it: its id replaces the made-up one."""

    def forget(self, pending: str) -> None:
        """It never reached the vendor: its lines are free to be submitted."""

    def state(self, batch_id: str, state: BatchState) -> None:
        pass


class _Queue:
    def __init__(self, key: str, client):
        self.key = key
        self.client = client
        self.items: list[tuple[str, dict, asyncio.Future]] = []
        self.size = 0
        self.grown = 0.0  # clock.now() of the last line added
        self.timer: asyncio.Task | None = None
        self.round = 0  # the round of its lines: their stage (Batcher.row)


class Batcher:
    def __init__(self, run_default: bool = False, journal: Journal | None = None, retry: str = "batch",
                 detach: bool = False, on_state: Callable[[int, str, BatchState], None] | None = None):
        self.run_default = run_default
        self.journal = journal or Journal()
        self.retry = retry if retry in RETRIES else "batch"
        self.detach = detach
        self.on_state = on_state  # (round, batch id, state) at each poll: the progress bars
        self.detached = asyncio.Event()  # --detach: every call left is in a submitted batch
        from factcli import settings

        self.quiet_s = settings.env_float("FACTCLI_BATCH_QUIET_MS", QUIET_S * 1000) / 1000
        self.poll_s = settings.env_float("FACTCLI_BATCH_POLL_MS", POLL_S * 1000) / 1000
        self._queues: dict[tuple[str, int], _Queue] = {}  # (endpoint, round) -> its queue
        self._stored = self.journal.lines()  # custom_id -> batch id, from earlier attempts of this run
        self._stored_batches = self.journal.batches()
        self._earlier = set(self._stored_batches)  # batches submitted by earlier attempts of the run
        self._waiting: dict[str, dict[str, list[asyncio.Future]]] = {}  # batch id -> custom_id -> waiters
        self._collected: dict[str, dict[str, LineResult]] = {}  # batch id -> its results, once read
        self._pollers: dict[str, asyncio.Task] = {}
        self._seen: dict[str, int] = {}
        self._open: dict[int, int] = {}  # round -> its batches out (being submitted, or not yet delivered)
        self._changed = asyncio.Event()  # set (and replaced) when a batch out is delivered
        self._delivered_at = float("-inf")  # clock.now() when the last batch out was delivered
        self._found: dict[str, str] = {}  # a pending batch's made-up id -> its id at the vendor (_recover)
        self._clients: dict[str, object] = {}
        self.submitted_lines = 0
        self.collected_lines = 0  # lines answered from a batch an earlier attempt of the run submitted
        self.rounds: dict[int, list[str]] = {}  # round -> the batch ids submitted in it
        self.outstanding = 0  # calls waiting on a batch
        self.billed = self.direct = 0.0  # the batched replies' cost, and the same tokens at the direct price
        self._tasks: set[asyncio.Task] = set()

    def takes(self, provider) -> bool:
        return wanted(provider, self.run_default)

    # ------------------------------------------------------------ one call

    async def call(self, provider, request) -> ProviderResponse | None:
        """The reply to `request` (a providers/request.CallRequest) from a batch; None when it is to be
        sent directly (a failed line with batchRetry: direct)."""
        body = provider.batch_body(request)
        key = provider.endpoint()
        base = self._custom_id(key, body)
        row = _ROW.get()
        if row is None:  # (a call outside a row: its own rounds)
            row = [0]
        result = None
        for attempt in range(MAX_TRIES):
            cid = base if attempt == 0 else f"{base}_r{attempt}"
            result, round_ = await self._line(provider, key, cid, body, row[0] + 1)
            row[0] = max(row[0], round_)  # the row's next call is of the next stage: the next round
            if result.body is not None:
                resp = provider.batch_reply(result.body, body)
                self._tally(provider, resp)
                return resp
            if not result.retry:
                break
            if self.retry == "direct":
                return None
        return ProviderResponse(error=f"batch line failed: {result.error}")

    def _tally(self, provider, resp: ProviderResponse) -> None:
        """What the batched replies cost, and what they would have cost sent directly (the summary's saving)."""
        if resp.error is not None or resp.cost is None:
            return
        from factcli.providers.pricing import price_of

        price = price_of(provider)
        if price is not None:
            self.billed += resp.cost
            self.direct += price.cost_of(resp.token_usage)

    def _custom_id(self, key: str, body: dict) -> str:
        digest = hashlib.sha256(json.dumps([key, body], sort_keys=True, default=str).encode()).hexdigest()[:24]
        n = self._seen[digest] = self._seen.get(digest, 0) + 1
        return f"{digest}-{n}"

    async def _line(self, provider, key: str, cid: str, body: dict, round_: int) -> tuple[LineResult, int]:
        """The line's result, and the round of the batch it came in."""
        future = asyncio.get_running_loop().create_future()
        self.outstanding += 1
        try:
            batch_id = self._stored.get(cid)
            if batch_id is not None:  # submitted by an earlier attempt of this run: collected, never sent again
                self.collected_lines += 1
                round_ = int((self._stored_batches.get(batch_id) or {}).get("round") or round_)
                self._wait_for(batch_id, cid, future, provider)
            else:
                self._enqueue(provider, key, cid, body, future, round_)
            return await future, round_
        finally:
            self.outstanding -= 1

    @contextlib.contextmanager
    def row(self):
        """Around one row (run/executor.py): its calls' rounds are counted from its own replies, so a line's
        round is its stage, whichever batches its row's earlier stages went in."""
        token = _ROW.set([0])
        try:
            yield
        finally:
            _ROW.reset(token)

    # ------------------------------------------------------------ queues and submission

    def _client(self, provider, key: str):
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = provider.batch_client()
        return client

    def _enqueue(self, provider, key: str, cid: str, body: dict, future: asyncio.Future, round_: int) -> None:
        queue = self._queues.get((key, round_))  # a queue per endpoint and round: a batch holds one stage
        if queue is None:
            queue = self._queues[(key, round_)] = _Queue(key, self._client(provider, key))
            queue.round = round_
        size = len(queue.client.line(cid, body)) if hasattr(queue.client, "line") else len(json.dumps(body))
        if queue.items and (len(queue.items) >= queue.client.max_lines or queue.size + size > queue.client.max_bytes):
            self._flush(queue)  # at the vendor's limit: this batch goes, the line starts the next
        queue.items.append((cid, body, future))
        queue.size += size
        queue.grown = clock.now()
        if queue.timer is None or queue.timer.done():
            queue.timer = self._spawn(self._quiet(queue))

    async def _quiet(self, queue: _Queue) -> None:
        """Submit the queue once it has stopped growing, and no batch of an earlier round is out: the lines
        those will free are of this queue's round (its stage), and belong in the same batch, so a stage takes
        one round even when its previous stage took several batches that end one by one."""
        while queue.items:
            left = self.quiet_s - (clock.now() - max(queue.grown, self._delivered_at))
            if left > 0:
                await clock.sleep(left)
                continue
            if any(n and r < queue.round for r, n in self._open.items()) or any(
                    q.items and q.round < queue.round for q in self._queues.values()):
                await self._changed.wait()
                continue
            self._flush(queue)

    def _opened(self, round_: int) -> None:
        self._open[round_] = self._open.get(round_, 0) + 1

    def _closed(self, round_: int) -> None:
        self._open[round_] -= 1
        self._delivered_at = clock.now()
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _flush(self, queue: _Queue) -> None:
        items, queue.items, queue.size, round_ = queue.items, [], 0, queue.round
        if not items:
            return
        self._opened(round_)
        self._spawn(self._submit(queue, items, round_))

    async def _submit(self, queue: _Queue, items: list, round_: int) -> None:
        lines = [(cid, body) for cid, body, _ in items]
        tag = uuid.uuid4().hex[:20]
        pending = PENDING + tag
        self.journal.intent(pending, queue.client.kind, queue.key, round_, [cid for cid, _ in lines],
                            getattr(queue.client, "base_url", None))
        try:
            batch_id = await queue.client.submit(lines, tag)
        except Exception as exc:  # noqa: BLE001 - the vendor refused the batch: each call gets the error
            self.journal.forget(pending)
            self._closed(round_)
            fatal = _fatal(exc, queue)
            message = f"the batch could not be submitted: {type(exc).__name__}: {exc}"
            for _, _, future in items:
                if not future.done():
                    if fatal is not None:
                        future.set_exception(fatal)
                    else:
                        future.set_result(LineResult(None, message, False))
            return
        self.submitted_lines += len(items)
        self.rounds.setdefault(round_, []).append(batch_id)
        self.journal.adopt(pending, batch_id)
        waiting = self._waiting.setdefault(batch_id, {})
        for cid, _, future in items:
            waiting.setdefault(cid, []).append(future)
        self._stored_batches[batch_id] = {"round": round_}
        self._pollers[batch_id] = self._spawn(self._poll(queue.client, batch_id, round_))
        if self.detach:
            self._spawn(self._maybe_detach())

    def _wait_for(self, batch_id: str, cid: str, future: asyncio.Future, provider) -> None:
        batch_id = self._found.get(batch_id, batch_id)
        collected = self._collected.get(batch_id)
        if collected is not None:
            future.set_result(collected.get(cid) or LineResult(None, "the batch has no result for this line"))
            return
        self._waiting.setdefault(batch_id, {}).setdefault(cid, []).append(future)
        if batch_id not in self._pollers:
            record = self._stored_batches.get(batch_id) or {}
            client = self._client(provider, provider.endpoint())
            round_ = int(record.get("round") or 0)
            self._opened(round_)
            if batch_id.startswith(PENDING):
                self._pollers[batch_id] = self._spawn(self._recover(client, batch_id, round_))
            else:
                self._pollers[batch_id] = self._spawn(self._poll(client, batch_id, round_))

    async def _recover(self, client, pending: str, round_: int) -> None:
        """A batch an earlier attempt of the run was submitting when it stopped: found at the vendor by
        its tag (then collected), or known never to have arrived (then its lines are submitted again)."""
        find = getattr(client, "find", None)
        try:
            batch_id = await find(pending[len(PENDING):]) if find is not None else None
        except Exception:  # noqa: BLE001 - cannot tell: submitting again risks a double bill, so say so
            batch_id = None
        if batch_id is None:
            self.journal.forget(pending)
            self._deliver(pending, round_, {},
                          "its batch never reached the vendor (the run stopped while submitting it)")
            return
        self.journal.adopt(pending, batch_id)
        self._found[pending] = batch_id
        self._earlier.add(batch_id)
        self._waiting.setdefault(batch_id, {}).update(self._waiting.pop(pending, {}))
        self._pollers[batch_id] = self._pollers[pending]
        await self._poll(client, batch_id, round_)

    async def _poll(self, client, batch_id: str, round_: int) -> None:
        delay, unread = self.poll_s, 0
        while True:
            try:
                state = await client.status(batch_id)
                unread = 0
            except Exception as exc:  # noqa: BLE001 - the SDK retried already
                unread += 1
                # a vendor out of reach for a while: keep polling (giving up would submit every line again,
                # billed twice); a batch it does not know, or a key it refuses, will not come back
                if getattr(exc, "status_code", None) in (401, 403, 404) or unread >= POLL_PATIENCE:
                    self._deliver(batch_id, round_, {},
                                  f"the batch {batch_id} could not be read: {type(exc).__name__}: {exc}")
                    return
                await clock.sleep(delay)
                delay = min(POLL_CAP_S, delay * POLL_GROWTH)
                continue
            self.journal.state(batch_id, state)
            if self.on_state is not None:
                self.on_state(round_, batch_id, state)
            if state.state == ENDED:
                break
            await clock.sleep(delay)
            delay = min(POLL_CAP_S, delay * POLL_GROWTH)
        try:
            results = await client.results(batch_id)
        except Exception as exc:  # noqa: BLE001
            self._deliver(batch_id, round_, {}, f"the results of batch {batch_id} could not be read: {exc}")
            return
        missing = state.error or f"the batch ended {state.status} without a result for this line"
        self._deliver(batch_id, round_, results, missing, retry=state.error is None)

    def _deliver(self, batch_id: str, round_: int, results: dict, missing: str, retry: bool = True) -> None:
        if batch_id in self._earlier:  # rows of a resumed run come for their lines as they run: kept for them
            self._collected[batch_id] = results
        self._closed(round_)
        for cid, futures in self._waiting.pop(batch_id, {}).items():
            result = results.get(cid) or LineResult(None, missing, retry)
            for future in futures:
                if not future.done():
                    future.set_result(result)

    async def _maybe_detach(self) -> None:
        """--detach: once nothing has been queued for a quiet window and every call left waits on a
        submitted batch, the run may exit (its batches are in the store)."""
        await clock.sleep(self.quiet_s)
        if any(q.items for q in self._queues.values()):
            return
        if self._waiting and all(b in self._pollers and not self._pollers[b].done() for b in self._waiting):
            self.detached.set()

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for client in self._clients.values():
            try:
                await client.aclose()
            except Exception:  # noqa: BLE001 - closing a client: nothing left to lose
                pass

    def summary(self) -> str | None:
        """One line for the run's notes: batches per round, lines submitted and collected."""
        if not self.rounds and not self.collected_lines:
            return None
        per = ", ".join(f"round {r}: {len(ids)} batch(es)" for r, ids in sorted(self.rounds.items()))
        said = f"batch mode: {self.submitted_lines} line(s) submitted ({per or 'none'})"
        if self.collected_lines:
            said += f"; {self.collected_lines} collected from batches submitted before --resume"
        if self.direct > self.billed:
            from factcli.report.figures import money

            said += f"; billed {money(self.billed)}, {money(self.direct - self.billed)} less than sent directly"
        return said


def stored_client(kind: str, base_url: str | None):
    """A batch client for a stored batch, without the run's providers (`factcli cancel`): its vendor and
    base URL from the store, its key from the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY)."""
    import os

    if kind == "anthropic":
        from factcli.providers.batch_anthropic import AnthropicBatches

        return AnthropicBatches(base_url, os.environ.get("ANTHROPIC_API_KEY"))
    from factcli.providers.batch_openai import OpenAIBatches

    key = os.environ.get("OPENAI_API_KEY") or ("no-key" if base_url else None)
    return OpenAIBatches(base_url or "https://api.openai.com/v1", key or "", "/v1/chat/completions")


async def cancel(batches: list[dict]) -> list[str]:
    """Cancel each stored batch at its vendor -> one line per batch: cancelled, or why not."""
    out = []
    for b in batches:
        client = stored_client(b.get("kind") or "openai", b.get("base_url"))
        try:
            await client.cancel(b["batch_id"])
            out.append(f"{b['batch_id']} ({b.get('kind')}): cancelling")
        except Exception as exc:  # noqa: BLE001 - one batch the vendor refuses does not stop the others
            out.append(f"{b['batch_id']} ({b.get('kind')}): not cancelled: {type(exc).__name__}: {exc}")
        finally:
            await client.aclose()
    return out


def _fatal(exc: Exception, queue: _Queue):
    """A refusal that every batch to this endpoint would get (no batch API there, a key refused): the
    run stops (errors.AbortRun, exit 3), saying how to run without batches."""
    from factcli.errors import AbortRun

    status = getattr(exc, "status_code", None)
    server = queue.key.rsplit(" ", 1)[0] or "the vendor"
    if status in (404, 405, 501):
        return AbortRun(f"--batch: {server} has no batch API (HTTP {status} from its "
                        f"{queue.client.kind} batch endpoints): run without --batch, or give this provider "
                        "`batch: false` in its config")
    if status in (401, 403):
        return AbortRun(f"--batch: {server} refused the batch (HTTP {status}): {exc}")
    return None


def settings_of(suite, options, graders=()) -> dict | None:
    """Batch mode's settings for a run (EvalRun.batch), or None when no call of it goes in a batch: --batch
    (else evaluateOptions.batch) for every provider with a batch API, a provider's or a grader's `batch:
    true` for its own. `graders`: (ProviderSpec, kind) of every grader the run may call (runner.check_graders)."""
    from factcli.errors import ConfigError, FactcliError

    eo = suite.evaluate_options
    default = options.batch if options.batch is not None else eo.get("batch") is True
    specs = [*suite.providers, *(spec for spec, _ in graders)]
    own = any((getattr(s, "config", None) or {}).get("batch") is True for s in specs)
    if not default and not own:
        if options.detach:
            raise FactcliError("--detach exits while batches run: it needs --batch (or evaluateOptions.batch)")
        return None
    retry = eo.get("batchRetry", "batch")
    if retry not in RETRIES:
        raise ConfigError(f"expected batch or direct, got {retry!r}", None, "evaluateOptions.batchRetry")
    return {"default": default, "retry": retry, "detach": bool(options.detach)}


async def until_detached(running, batcher: Batcher) -> bool:
    """--detach: the rows run until every call left waits on a submitted batch; then they are left (their
    batches are in the store, `--resume RUN` collects them) -> True; False when they all finished."""
    rows = asyncio.ensure_future(running)
    waiter = asyncio.ensure_future(batcher.detached.wait())
    try:
        await asyncio.wait([rows, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        left = not rows.done()
        if left:
            rows.cancel()
            await asyncio.gather(rows, return_exceptions=True)
    if not left and rows.exception() is not None:
        raise rows.exception()
    return left
