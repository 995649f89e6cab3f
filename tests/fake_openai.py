"""A fake OpenAI-compatible HTTP server for tests (no network beyond 127.0.0.1).

The real provider clients (litellm, the ``openai`` SDK, raw aiohttp, promptfoo)
talk to it over real HTTP/1.1 on ``127.0.0.1`` with keep-alive, so the test
suite exercises the real client stacks while never leaving the machine.

Usage::

    with FakeOpenAI(rules=[(r"capital of France", "Paris")]) as server:
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        client.chat.completions.create(model="m", messages=[...])

Endpoints (each also served without the ``/v1`` prefix):

* ``POST /v1/chat/completions``  -- chat format; ``stream: true`` is answered with 400.
* ``POST /v1/completions``       -- legacy text completions (``choices[i].text``).
* ``POST /v1/embeddings``        -- deterministic unit vectors (dimension 8 unless the
  request asks for ``dimensions``) derived from SHA-256 of each input; honours
  ``encoding_format: "base64"`` (the openai SDK asks for it by default).
* ``GET  /v1/models`` and ``GET /v1/models/{id}``.

Reply selection for the generation endpoints (chat, completions), in order:

1. the one-shot queue (FIFO) filled by :meth:`FakeOpenAI.enqueue` and the
   ``enqueue_*`` fault helpers -- consumed by *every* POST endpoint, embeddings
   included;
2. if the queue is empty and a fault rate is set (:meth:`set_fault_rate`), a
   deterministic pseudo-random draw may answer with a fault;
3. ``rules``: ``(pattern, reply[, model])``; the regex ``pattern`` is searched
   (``re.search``) in the LAST user message (list-of-parts content: the text parts
   joined with ``"\\n"``; for legacy completions: the prompt); the first matching
   rule wins; a rule with ``model`` only applies to requests for exactly that model;
4. default: ``f"Echo: {last_user_message}"``.

A reply is a ``str``; a ``dict`` ``{"content": ..., "finish_reason": ...,
"tool_calls": [...]}``; or a callable ``(request_json) -> str | dict``.
A rule whose reply is a list of numbers is an *embedding* rule: it applies to
``/v1/embeddings`` only (that vector is returned for each input it matches), and
the other rules never apply to embeddings.

Structured output: requests are logged whole (``requests``); ``generations`` lists each generation
request's ``response_format`` and ``max_tokens``; ``refuse_response_format("json_schema")`` makes the
server answer 400 naming ``response_format`` to that form, as servers without structured output do.
Otherwise (the default) the server takes ``response_format`` and ignores it: it answers by its rules
whatever schema was asked, as servers and gateways that drop the parameter do (litellm routes without
structured output, OpenAI-compatible servers without a grammar), so a judge's reply can be prose or
promptfoo's text forms where a schema was sent (tests/test_reply_protocols.py).

Determinism: ids are derived from a hash of the request body, ``created`` is the
constant :data:`CREATED`, so identical requests get byte-identical responses.
Token usage counts whitespace-separated words (prompt: all messages' text;
completion: the reply).  If the request has ``max_tokens`` /
``max_completion_tokens`` and the reply has more words, it is cut to that many
words and ``finish_reason`` becomes ``"length"``.

TCP_NODELAY: aiohttp sets it on every accepted socket
(``BaseProtocol.connection_made``); the handler checks it on each request
(``server.nodelay_seen``) and sets it again if it were ever off.  Every reply is
a ``web.Response`` with a ``Content-Length`` body, which aiohttp sends headers +
body in a single ``transport.write``, so keep-alive requests do not pay the
Nagle / delayed-ACK ~40 ms penalty.

Run standalone (e.g. for promptfoo)::

    python tests/fake_openai.py --port 8765 --rules rules.json --latency 0

``rules.json`` is a JSON list of ``[pattern, reply]`` or ``[pattern, reply, model]``
(or ``{"pattern":..., "reply":..., "model":...}``) entries.  The first line of
stdout is the base URL (``http://127.0.0.1:8765/v1``).  SIGINT/SIGTERM stop it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import dataclasses
import hashlib
import json
import math
import random
import re
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any, Callable, Iterable, Union

from aiohttp import web
from prompt_caches import OpenAIPrefixCache

__all__ = ["FakeOpenAI", "Fault", "CREATED", "DEFAULT_MODEL", "EMBEDDING_DIM", "main"]

HOST = "127.0.0.1"
CREATED = 1_700_000_000  # constant "created" timestamp, for byte-stable golden files
DEFAULT_MODEL = "fake-model"
EMBEDDING_DIM = 8
LOGPROB = -0.1  # logprob given to every generated token
MAX_SLEEP = 600.0  # upper bound for latency / hang, in seconds
MAX_LOG = 10_000  # request-log entries kept (oldest dropped first)
MAX_BODY = 16 * 1024 * 1024  # request bodies above this get 413 from aiohttp
DEFAULT_HANG_SECONDS = 30.0

Reply = Union[str, dict, list, Callable[[dict], Any]]


# --------------------------------------------------------------------------- faults


@dataclasses.dataclass(frozen=True)
class Fault:
    """A scripted failure.  ``kind`` is ``"status"``, ``"hang"``, ``"drop"`` or ``"malformed"``."""

    kind: str
    status: int = 500
    retry_after: str | None = None
    body: Any = None  # dict/list -> JSON; str/bytes -> sent verbatim as text/plain
    headers: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0  # for "hang"

    @classmethod
    def parse(cls, spec: str, hang_seconds: float = DEFAULT_HANG_SECONDS) -> "Fault":
        """Parse a fault-rate kind: ``"429"``, ``"429-retry-after[:N]"``, ``"500"``, ...,
        ``"hang[:SECONDS]"``, ``"drop"``, ``"malformed"``."""
        s = spec.strip().lower()
        name, _, arg = s.partition(":")
        if name == "hang":
            return cls("hang", seconds=_bounded_seconds(float(arg) if arg else hang_seconds))
        if name in ("drop", "malformed") and not arg:
            return cls(name)
        m = re.fullmatch(r"([1-5]\d\d)(-retry-after)?", name)
        if m and (not arg or m.group(2)):
            retry_after = (arg or "1") if m.group(2) else None
            return cls("status", status=int(m.group(1)), retry_after=retry_after)
        raise ValueError(f"unknown fault kind {spec!r}")


_ERRORS: dict[int, tuple[str, str | None, str]] = {
    # status: (type, code, message)
    400: ("invalid_request_error", None, "Bad request (fake)."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided (fake)."),
    403: ("request_forbidden", "unsupported_country_region_territory", "Forbidden (fake)."),
    404: ("invalid_request_error", "model_not_found", "Not found (fake)."),
    408: ("timeout_error", None, "Request timed out (fake)."),
    409: ("invalid_request_error", "conflict", "Conflict (fake)."),
    422: ("invalid_request_error", None, "Unprocessable entity (fake)."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached (fake). Please try again later."),
    500: ("server_error", None, "The server had an error while processing your request (fake)."),
    502: ("server_error", "bad_gateway", "Bad gateway (fake)."),
    503: ("server_error", "service_unavailable", "The server is overloaded or not ready yet (fake)."),
    504: ("server_error", "gateway_timeout", "Gateway timeout (fake)."),
}


def _error_body(status: int, message: str | None = None) -> dict:
    etype, code, default_message = _ERRORS.get(
        status,
        ("server_error" if status >= 500 else "invalid_request_error", None, f"HTTP {status} (fake)."),
    )
    return {"error": {"message": message or default_message, "type": etype, "param": None, "code": code}}


def _bounded_seconds(value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"seconds must be a finite number >= 0, got {value!r}")
    return min(value, MAX_SLEEP)


# --------------------------------------------------------------------------- helpers


def _content_text(content: Any) -> str:
    """Text of a message ``content``: a string, or the text parts of a list joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return str(content)


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def _tokens(text: str) -> list[str]:
    """Whitespace tokens with their leading whitespace, so ``"".join`` gives back the text."""
    return re.findall(r"\s*\S+", text or "")


def _stable_id(prefix: str, body: Any) -> str:
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
    return f"{prefix}-fake{digest[:24]}"


def _hash_vector(text: str, dim: int) -> list[float]:
    """Deterministic unit vector from SHA-256 of ``text``."""
    raw = b""
    counter = 0
    while len(raw) < 4 * dim:
        raw += hashlib.sha256(f"{counter}:{text}".encode()).digest()
        counter += 1
    ints = struct.unpack(f"<{dim}I", raw[: 4 * dim])
    vec = [(i / 0xFFFFFFFF) * 2.0 - 1.0 for i in ints]
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [round(v / norm, 6) for v in vec]


def _is_vector(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    )


def _json(data: Any, status: int = 200, headers: dict | None = None) -> web.Response:
    # One Response with a Content-Length body -> aiohttp writes headers + body in one write.
    return web.Response(
        body=json.dumps(data, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


# --------------------------------------------------------------------------- server


class InFlight:
    """Requests being answered at once, and the most seen; one object may count for several servers
    (``server.in_flight = shared``), or a server's own count add to a shared one (``InFlight(shared)``):
    what a client's cap on calls in flight is measured with."""

    def __init__(self, also: "InFlight | None" = None) -> None:
        self._lock = threading.Lock()
        self.also = also
        self.now = 0
        self.most = 0

    def __enter__(self) -> None:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        if self.also is not None:
            self.also.__enter__()

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self.now -= 1
        if self.also is not None:
            self.also.__exit__()


class FakeOpenAI:
    """Fake OpenAI-compatible server on 127.0.0.1 running in a background thread.

    Args:
        rules: list of ``(pattern, reply)`` or ``(pattern, reply, model)``.
        latency: seconds to sleep (``asyncio.sleep``) before every reply; settable later.
        port: TCP port, 0 (default) for a free one.
        models: model ids listed by ``GET /v1/models`` (plus every model seen in
            requests and named by model-restricted rules).
    """

    def __init__(
        self,
        rules: Iterable[Any] | None = None,
        *,
        latency: float = 0.0,
        port: int = 0,
        models: Iterable[str] = (DEFAULT_MODEL,),
    ) -> None:
        self._lock = threading.Lock()
        self._rules: list[tuple[re.Pattern, Reply, str | None]] = []
        self._queue: collections.deque = collections.deque()
        self._log: collections.deque = collections.deque(maxlen=MAX_LOG)
        self._faults: collections.deque = collections.deque(maxlen=MAX_LOG)
        self._request_count = 0
        self.in_flight = InFlight()  # requests being answered (from the body read to the reply)
        self._abandoned = 0
        self._models: dict[str, None] = dict.fromkeys(models)
        self._fault_rate = 0.0
        self._rate_limit: tuple[int, float, str | None] | None = None  # (requests, per seconds, Retry-After)
        self._admitted: collections.deque = collections.deque()  # monotonic times of admitted POSTs
        self._rate_limited = 0
        self._fault_kinds: list[Fault] = []
        self._fault_rng = random.Random(0)
        self._nodelay: list[bool] = []
        self.latency = latency
        self.send_usage = True  # False: replies carry no `usage`, as some local servers send them
        # a chat reply's usage.prompt_tokens_details.cached_tokens: this many of its prompt_tokens (at
        # most all of them) read from OpenAI's prompt cache, among prompt_tokens as OpenAI counts them
        self.cached_tokens = 0
        # OpenAI's automatic prefix caching (tests/prompt_caches.py): usage.prompt_tokens_details.cached_tokens
        self.prefix_cache = OpenAIPrefixCache()
        self._refused_formats: set[str] = set()  # response_format types answered with 400
        self._format_refusals = 0
        self._requested_port = port
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._startup_error: BaseException | None = None
        for rule in rules or ():
            if isinstance(rule, dict):
                self.add_rule(rule["pattern"], rule["reply"], model=rule.get("model"))
            else:
                self.add_rule(*rule)

    # ------------------------------------------------------------------ configuration

    @property
    def latency(self) -> float:
        return self._latency

    @latency.setter
    def latency(self, value: float) -> None:
        self._latency = _bounded_seconds(value)

    def add_rule(self, pattern: str | re.Pattern, reply: Reply, model: str | None = None) -> None:
        """Append a rule (rules are tried in insertion order; first match wins)."""
        compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
        if not (isinstance(reply, (str, dict)) or callable(reply) or _is_vector(reply)):
            raise TypeError(f"reply must be str, dict, list of numbers or callable, got {type(reply)!r}")
        with self._lock:
            self._rules.append((compiled, reply, model))
            if model:
                self._models.setdefault(model, None)

    def clear_rules(self) -> None:
        with self._lock:
            self._rules.clear()

    def enqueue(self, *items: Reply | Fault) -> None:
        """Queue one-shot behaviours (FIFO): replies (str/dict/callable; for embeddings a
        list of numbers or a str to hash) or :class:`Fault` objects."""
        for item in items:
            if not (isinstance(item, (str, dict, Fault)) or callable(item) or _is_vector(item)):
                raise TypeError(f"cannot enqueue {type(item)!r}")
        with self._lock:
            self._queue.extend(items)

    def enqueue_fault(
        self,
        status: int = 429,
        retry_after: str | int | float | None = None,
        body: Any = None,
        times: int = 1,
        *,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Queue ``times`` HTTP error replies with an OpenAI-style JSON error body
        (or ``body``), and a ``Retry-After`` header when ``retry_after`` is given."""
        if not 400 <= int(status) <= 599:
            raise ValueError("status must be 4xx or 5xx")
        fault = Fault(
            "status",
            status=int(status),
            retry_after=None if retry_after is None else str(retry_after),
            body=body,
            headers=tuple((headers or {}).items()),
        )
        self.enqueue(*([fault] * int(times)))

    def enqueue_hang(self, seconds: float = DEFAULT_HANG_SECONDS, times: int = 1) -> None:
        """Queue a delay of ``seconds`` before a normal reply (to trigger client timeouts).
        The sleep is cut short if the client disconnects or the server stops."""
        self.enqueue(*([Fault("hang", seconds=_bounded_seconds(seconds))] * int(times)))

    def enqueue_drop(self, times: int = 1) -> None:
        """Queue closing the connection without sending any response."""
        self.enqueue(*([Fault("drop")] * int(times)))

    def enqueue_malformed(self, times: int = 1) -> None:
        """Queue a 200 reply whose JSON body is truncated (invalid)."""
        self.enqueue(*([Fault("malformed")] * int(times)))

    def set_rate_limit(self, requests: int | None, per_seconds: float = 60.0, retry_after: str | None = None) -> None:
        """Answer 429 (with ``Retry-After: retry_after`` when given) to any POST beyond ``requests`` in
        a sliding window of ``per_seconds``, as a provider's rate limit does; ``None`` turns it off.
        ``rate_limited`` counts the 429s it served (they are in the request log like any request)."""
        with self._lock:
            self._rate_limit = None if requests is None else (int(requests), float(per_seconds), retry_after)
            self._admitted.clear()
            self._rate_limited = 0

    @property
    def rate_limited(self) -> int:
        with self._lock:
            return self._rate_limited

    def _over_rate_limit(self) -> str | None | bool:
        """False when the request is admitted; else the Retry-After to send (None for no header)."""
        with self._lock:
            if self._rate_limit is None:
                return False
            limit, window, retry_after = self._rate_limit
            now = time.monotonic()
            while self._admitted and now - self._admitted[0] >= window:
                self._admitted.popleft()
            if len(self._admitted) < limit:
                self._admitted.append(now)
                return False
            self._rate_limited += 1
            return retry_after

    def set_fault_rate(
        self,
        fraction: float,
        kinds: Iterable[str] = ("500",),
        seed: int = 0,
        *,
        hang_seconds: float = DEFAULT_HANG_SECONDS,
    ) -> None:
        """Answer a deterministic pseudo-random ``fraction`` (0..1) of POST requests
        (when the queue is empty) with a fault drawn from ``kinds``: ``"429"``,
        ``"429-retry-after"`` (Retry-After: 1; ``"429-retry-after:N"`` for N),
        any other status such as ``"500"``/``"503"``, ``"hang"``/``"hang:SECONDS"``,
        ``"drop"``, ``"malformed"``.  The sequence depends only on ``seed`` and the
        order of requests.  ``set_fault_rate(0)`` turns it off."""
        fraction = float(fraction)
        if not 0.0 <= fraction <= 1.0:
            raise ValueError("fraction must be within [0, 1]")
        parsed = [Fault.parse(k, hang_seconds) for k in kinds]
        if fraction > 0 and not parsed:
            raise ValueError("kinds must not be empty")
        with self._lock:
            self._fault_rate = fraction
            self._fault_kinds = parsed
            self._fault_rng = random.Random(seed)

    def reset(self) -> None:
        """Clear the queue, the request log and the prompt cache (rules, latency and fault rate stay)."""
        with self._lock:
            self._queue.clear()
            self._log.clear()
            self._faults.clear()
            self._request_count = 0
            self.in_flight = InFlight()
            self._abandoned = 0
            self._nodelay.clear()
            self._format_refusals = 0
            self.prefix_cache = OpenAIPrefixCache()

    def refuse_response_format(self, *types: str) -> None:
        """Answer 400 naming ``response_format`` (OpenAI's error body, ``param: "response_format"``) to
        generation requests whose ``response_format.type`` is one of ``types`` (e.g. ``"json_schema"``,
        as a server without structured output does); no argument turns it off."""
        with self._lock:
            self._refused_formats = set(types)

    @property
    def format_refusals(self) -> int:
        """Requests answered 400 by :meth:`refuse_response_format` since start / :meth:`reset`."""
        with self._lock:
            return self._format_refusals

    @property
    def generations(self) -> list[dict]:
        """The generation requests received (chat and legacy completions), each
        ``{"model", "response_format", "max_tokens", "json"}``: ``response_format`` as sent (None
        when absent), ``max_tokens`` the request's cap (``max_completion_tokens`` if given, else
        ``max_tokens``; None when uncapped)."""
        out = []
        for r in self.requests:
            body = r["json"]
            if r["method"] != "POST" or not isinstance(body, dict) or not r["path"].endswith("completions"):
                continue
            cap = body.get("max_completion_tokens", body.get("max_tokens"))
            out.append({"model": body.get("model"), "response_format": body.get("response_format"),
                        "max_tokens": cap, "json": body})
        return out

    # ------------------------------------------------------------------ inspection

    @property
    def abandoned(self) -> int:
        """Requests whose client closed the connection while the server was still working on them."""
        with self._lock:
            return self._abandoned

    @property
    def requests(self) -> list[dict]:
        """Snapshot of the request log: ``{"path", "method", "headers", "json"}`` dicts
        (``json`` is None when the body is empty or not JSON).  Keeps the last MAX_LOG."""
        with self._lock:
            return list(self._log)

    @property
    def faults_served(self) -> list[dict]:
        """Faults answered so far (queued or drawn by the fault rate), oldest first:
        ``{"kind", "status", "json"}`` with the request body, so a test can tell which
        prompt each fault hit.  Cleared by :meth:`reset`."""
        with self._lock:
            return list(self._faults)

    @property
    def request_count(self) -> int:
        """Requests received since start / the last :meth:`reset`."""
        with self._lock:
            return self._request_count

    @property
    def queue_length(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def nodelay_seen(self) -> list[bool]:
        """TCP_NODELAY state of the socket as each request arrived (should be all True)."""
        with self._lock:
            return list(self._nodelay)

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeOpenAI is not running")
        return self._port

    @property
    def root_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def url(self) -> str:
        """Base URL for OpenAI clients, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"{self.root_url}/v1"

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self, timeout: float = 10.0) -> "FakeOpenAI":
        if self._thread is not None:
            raise RuntimeError("FakeOpenAI already started")
        ready = threading.Event()
        self._startup_error = None
        self._thread = threading.Thread(target=self._run, args=(ready,), name="FakeOpenAI", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError("FakeOpenAI did not start in time")
        if self._startup_error is not None:
            self._thread.join(timeout)
            self._thread = None
            raise self._startup_error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server: wake sleeping handlers, close connections, join the thread."""
        thread, loop = self._thread, self._loop
        if thread is None:
            return
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._request_stop)
            except RuntimeError:  # loop closed in between
                pass
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError("FakeOpenAI thread did not stop in time")
        self._thread = None
        self._port = None

    def _request_stop(self) -> None:
        assert self._stopping is not None and self._loop is not None
        self._stopping.set()
        self._loop.stop()

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            try:
                loop.run_until_complete(self._astart())
            except BaseException as exc:  # noqa: BLE001 - reported to start()
                self._startup_error = exc
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._astop())
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    async def _astart(self) -> None:
        self._stopping = asyncio.Event()
        app = web.Application(middlewares=[self._middleware], client_max_size=MAX_BODY)
        for prefix in ("/v1", ""):
            app.router.add_post(prefix + "/chat/completions", self._chat)
            app.router.add_post(prefix + "/completions", self._completions)
            app.router.add_post(prefix + "/embeddings", self._embeddings)
            app.router.add_get(prefix + "/models", self._list_models)
            app.router.add_get(prefix + "/models/{model:.+}", self._get_model)
        self._more_routes(app)
        # handler_cancellation: a client that gives up (timeout) cancels its hanging handler.
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await runner.setup()
        self._runner = runner
        site = web.TCPSite(runner, HOST, self._requested_port, reuse_address=True)
        await site.start()
        self._port = runner.addresses[0][1]

    def _more_routes(self, app: web.Application) -> None:
        """A subclass's own endpoints (tests/fake_batches.py: files and batches)."""

    async def _astop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ------------------------------------------------------------------ request plumbing

    @staticmethod
    async def _body(request: web.Request) -> Any:
        """The request body parsed as JSON (aiohttp caches the raw bytes), or None."""
        raw = await request.read()
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Callable) -> web.StreamResponse:
        with self.in_flight:
            return await self._answer(request, handler)

    async def _answer(self, request: web.Request, handler: Callable) -> web.StreamResponse:
        body = await self._body(request)
        sock = request.transport.get_extra_info("socket") if request.transport else None
        nodelay = True
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            nodelay = bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            if not nodelay:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._request_count += 1
            self._nodelay.append(nodelay)
            if len(self._nodelay) > MAX_LOG:
                del self._nodelay[0]
            self._log.append(
                {"path": request.path, "method": request.method, "headers": dict(request.headers), "json": body}
            )
        if request.method == "POST":
            over = self._over_rate_limit()
            if over is not False:
                headers = {} if over is None else {"Retry-After": over}
                return _json(_error_body(429), status=429, headers=headers)
        if self._latency:
            await self._sleep(self._latency)
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status >= 400:
                return _json(_error_body(exc.status, exc.reason), status=exc.status)
            raise

    async def _sleep(self, seconds: float) -> None:
        """Sleep, but wake up early when the server is stopping. A client that closes its connection
        meanwhile cancels the handler (handler_cancellation): counted in ``abandoned``."""
        assert self._stopping is not None
        try:
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)
        except asyncio.TimeoutError:
            pass
        except asyncio.CancelledError:
            with self._lock:
                self._abandoned += 1
            raise

    def _next_item(self) -> Any:
        """Pop the next queued item, or draw from the fault rate; None if neither applies."""
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            if self._fault_rate > 0:
                rng = self._fault_rng
                hit = rng.random() < self._fault_rate
                fault = rng.choice(self._fault_kinds)
                if hit:
                    return fault
        return None

    async def _apply_fault(self, request: web.Request, fault: Fault) -> web.StreamResponse | None:
        """Return the fault's response, or None to go on with a normal reply (after a hang)."""
        if fault.kind == "hang":
            await self._sleep(fault.seconds)
            return None
        if fault.kind == "drop":
            # Close the socket without a byte of response; aiohttp then ignores the
            # write of the placeholder response ("premature client disconnection").
            request.protocol.force_close()
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=500)
        if fault.kind == "malformed":
            return web.Response(
                body=b'{"id": "chatcmpl-malformed", "object": "chat.completion", "choices": [{"index": 0, "mess',
                status=200,
                content_type="application/json",
            )
        headers = dict(fault.headers)
        if fault.retry_after is not None:
            headers["Retry-After"] = fault.retry_after
        if fault.body is None or isinstance(fault.body, (dict, list)):
            return _json(fault.body if fault.body is not None else _error_body(fault.status), fault.status, headers)
        data = fault.body if isinstance(fault.body, bytes) else str(fault.body).encode()
        return web.Response(body=data, status=fault.status, content_type="text/plain", headers=headers)

    def _bad_request(self, message: str) -> web.Response:
        return _json(_error_body(400, message), status=400)

    def _match_rule(self, text: str, model: str, *, embedding: bool) -> tuple[bool, Any]:
        with self._lock:
            rules = list(self._rules)
        for pattern, reply, rule_model in rules:
            if rule_model is not None and rule_model != model:
                continue
            if _is_vector(reply) != embedding:
                continue
            if pattern.search(text):
                return True, reply
        return False, None

    def _resolve(self, reply: Any, body: dict) -> Any:
        for _ in range(8):  # a callable may return another callable; bounded
            if not callable(reply):
                break
            reply = reply(body)
        return reply

    async def _generation_prelude(self, request: web.Request) -> tuple[dict | None, Any, web.StreamResponse | None]:
        """Validate, then pop a queued item / fault.  Returns (body, item, early_response)."""
        body = await self._body(request)
        if not isinstance(body, dict):
            return None, None, self._bad_request("Request body must be a JSON object.")
        if body.get("stream"):
            return None, None, self._bad_request("FakeOpenAI does not support stream=true.")
        model = body.get("model")
        if isinstance(model, str) and model:
            with self._lock:
                self._models.setdefault(model, None)
        rf = body.get("response_format")
        kind = rf.get("type") if isinstance(rf, dict) else None
        with self._lock:
            refused = kind in self._refused_formats
            self._format_refusals += refused
        if refused:
            return None, None, _json({"error": {
                "message": f"Invalid parameter: 'response_format' of type '{kind}' is not supported with this model.",
                "type": "invalid_request_error", "param": "response_format", "code": None}}, status=400)
        item = self._next_item()
        if isinstance(item, Fault):
            with self._lock:
                self._faults.append({"kind": item.kind, "status": item.status, "json": body})
            response = await self._apply_fault(request, item)
            return body, None, response
        return body, item, None

    def _reply_for(self, item: Any, prompt: str, body: dict) -> tuple[str | None, str | None, list | None]:
        """(content, finish_reason or None, tool_calls or None) for a generation request."""
        model = str(body.get("model") or "")
        if item is None:
            matched, item = self._match_rule(prompt, model, embedding=False)
            if not matched:
                item = f"Echo: {prompt}"
        reply = self._resolve(item, body)
        if isinstance(reply, dict):
            tool_calls = reply.get("tool_calls")
            content = reply.get("content")
            if content is not None:
                content = str(content)
            return content, reply.get("finish_reason"), _normalize_tool_calls(tool_calls) if tool_calls else None
        return ("" if reply is None else str(reply)), None, None

    # ------------------------------------------------------------------ handlers

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body, item, early = await self._generation_prelude(request)
        if early is not None:
            return early
        assert body is not None
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self._bad_request("'messages' must be a non-empty list.")
        last_user = ""
        prompt_tokens = 0
        for msg in messages:
            if not isinstance(msg, dict):
                return self._bad_request("each message must be an object.")
            text = _content_text(msg.get("content"))
            prompt_tokens += _words(text)
            if msg.get("role") == "user":
                last_user = text
        if not last_user:  # e.g. a grader prompt that is a single system message
            last_user = _content_text(messages[-1].get("content"))
        content, finish_reason, tool_calls = self._reply_for(item, last_user, body)
        content, cut = _truncate(content, body.get("max_completion_tokens") or body.get("max_tokens"))
        finish_reason = finish_reason or ("length" if cut else "tool_calls" if tool_calls else "stop")
        completion_tokens = _words(content) + sum(_words(tc["function"]["arguments"]) for tc in tool_calls or ())
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if tool_calls:
            message["tool_calls"] = tool_calls
        choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": _chat_logprobs(content or "", body.get("top_logprobs"))}
        n = _bounded_n(body.get("n"))
        choices = [dict(choice, index=i) for i in range(n)]
        return _json(
            {
                "id": _stable_id("chatcmpl", body),
                "object": "chat.completion",
                "created": CREATED,
                "model": body.get("model") or DEFAULT_MODEL,
                "system_fingerprint": "fp_fake",
                "choices": choices,
                **({"usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens * n,
                    "total_tokens": prompt_tokens + completion_tokens * n,
                    **({"prompt_tokens_details": {"cached_tokens": min(self.cached_tokens, prompt_tokens)}}
                       if self.cached_tokens else self._prompt_cache_details(body)),
                }} if self.send_usage else {}),
            }
        )

    def _prompt_cache_details(self, body: dict) -> dict:
        """OpenAI's `prompt_tokens_details` of a chat reply: the prefix its automatic caching served."""
        cached = self.prefix_cache.cached_tokens(str(body.get("model") or DEFAULT_MODEL), body.get("messages") or [],
                                                 [body.get("tools"), body.get("response_format")])
        return {"prompt_tokens_details": {"cached_tokens": cached}}

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body, item, early = await self._generation_prelude(request)
        if early is not None:
            return early
        assert body is not None
        prompt = body.get("prompt", "")
        prompts = prompt if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt) else [prompt]
        prompts = [p if isinstance(p, str) else json.dumps(p) for p in prompts][:128]
        n = _bounded_n(body.get("n"))
        choices = []
        prompt_tokens = completion_tokens = 0
        for p in prompts:
            prompt_tokens += _words(p)
            # A queued item answers every prompt of this one request.
            content, finish_reason, _ = self._reply_for(item, p, body)
            content, cut = _truncate(content or "", body.get("max_tokens"))
            finish_reason = finish_reason or ("length" if cut else "stop")
            text = (p + content) if body.get("echo") else content
            logprobs = _legacy_logprobs(content, body.get("logprobs")) if body.get("logprobs") is not None else None
            for _ in range(n):
                choices.append(
                    {"text": text, "index": len(choices), "logprobs": logprobs, "finish_reason": finish_reason}
                )
                completion_tokens += _words(content)
        return _json(
            {
                "id": _stable_id("cmpl", body),
                "object": "text_completion",
                "created": CREATED,
                "model": body.get("model") or DEFAULT_MODEL,
                "system_fingerprint": "fp_fake",
                "choices": choices,
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        )

    async def _embeddings(self, request: web.Request) -> web.StreamResponse:
        body, item, early = await self._generation_prelude(request)
        if early is not None:
            return early
        assert body is not None
        inputs = body.get("input")
        if isinstance(inputs, str) or (isinstance(inputs, list) and inputs and isinstance(inputs[0], int)):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs:
            return self._bad_request("'input' must be a string or a non-empty list.")
        if len(inputs) > 2048:
            return self._bad_request("at most 2048 inputs.")
        dim = body.get("dimensions") or EMBEDDING_DIM
        if not isinstance(dim, int) or not 1 <= dim <= 4096:
            return self._bad_request("'dimensions' must be an integer in 1..4096.")
        model = str(body.get("model") or "")
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        tokens = 0
        for i, one in enumerate(inputs):
            text = one if isinstance(one, str) else json.dumps(one)
            tokens += _words(text) if isinstance(one, str) else len(one) if isinstance(one, list) else 1
            source = item
            if source is None:
                matched, source = self._match_rule(text, model, embedding=True)
                if not matched:
                    source = text
            source = self._resolve(source, body)
            if _is_vector(source):
                vec = [float(v) for v in source]
            else:
                vec = _hash_vector(source if isinstance(source, str) else json.dumps(source), dim)
            embedding: Any = vec
            if as_base64:
                embedding = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
            data.append({"object": "embedding", "index": i, "embedding": embedding})
        return _json(
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or DEFAULT_MODEL,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    def _model_card(self, model: str) -> dict:
        return {"id": model, "object": "model", "created": CREATED, "owned_by": "fake-openai"}

    async def _list_models(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            models = list(self._models)
        return _json({"object": "list", "data": [self._model_card(m) for m in models]})

    async def _get_model(self, request: web.Request) -> web.StreamResponse:
        return _json(self._model_card(request.match_info["model"]))


def _bounded_n(n: Any) -> int:
    return n if isinstance(n, int) and 1 <= n <= 16 else 1


def _truncate(content: str | None, max_tokens: Any) -> tuple[str | None, bool]:
    if content is None or not isinstance(max_tokens, int) or max_tokens <= 0:
        return content, False
    toks = _tokens(content)
    if len(toks) <= max_tokens:
        return content, False
    return "".join(toks[:max_tokens]).lstrip(), True


def _normalize_tool_calls(tool_calls: list) -> list[dict]:
    out = []
    for i, tc in enumerate(tool_calls):
        fn = tc.get("function", tc)
        args = fn.get("arguments", {})
        out.append(
            {
                "id": tc.get("id") or f"call_fake_{i}",
                "type": "function",
                "function": {
                    "name": fn["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    return out


def _chat_logprobs(content: str, top: Any) -> list[dict]:
    k = top if isinstance(top, int) and 0 <= top <= 20 else 0
    out = []
    for tok in _tokens(content):
        alternatives = [{"token": tok, "logprob": LOGPROB, "bytes": list(tok.encode())}]
        alternatives += [
            {"token": f" alt{j}", "logprob": -2.0 - j, "bytes": list(f" alt{j}".encode())} for j in range(1, k)
        ]
        out.append({"token": tok, "logprob": LOGPROB, "bytes": list(tok.encode()), "top_logprobs": alternatives[:k]})
    return out


def _legacy_logprobs(content: str, top: Any) -> dict:
    toks = _tokens(content)
    offsets, pos = [], 0
    for tok in toks:
        offsets.append(pos)
        pos += len(tok)
    k = top if isinstance(top, int) and top > 0 else 0
    return {
        "tokens": toks,
        "token_logprobs": [LOGPROB] * len(toks),
        "top_logprobs": [{tok: LOGPROB} for tok in toks] if k else None,
        "text_offset": offsets,
    }


# --------------------------------------------------------------------------- CLI


def _load_rules(path: str) -> list:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, list):
        raise SystemExit(f"{path}: expected a JSON list of [pattern, reply] pairs")
    rules = []
    for entry in data:
        if isinstance(entry, dict):
            rules.append((entry["pattern"], entry["reply"], entry.get("model")))
        elif isinstance(entry, list) and len(entry) in (2, 3):
            rules.append(tuple(entry))
        else:
            raise SystemExit(f"{path}: bad rule {entry!r}")
    return rules


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible server on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=8765, help="TCP port (0 = any free port)")
    parser.add_argument("--rules", help="JSON file: list of [pattern, reply] or [pattern, reply, model]")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--fault-rate", type=float, default=0.0, help="fraction of requests answered with a fault")
    parser.add_argument("--fault-kinds", default="500", help="comma-separated fault kinds, e.g. 429,500,drop")
    parser.add_argument("--seed", type=int, default=0, help="seed for --fault-rate")
    parser.add_argument("--rate-limit", metavar="N[/SECONDS[/RETRY_AFTER]]",
                        help="answer 429 beyond N POSTs per SECONDS (default 60), with Retry-After when given")
    args = parser.parse_args(argv)

    server = FakeOpenAI(_load_rules(args.rules) if args.rules else None, latency=args.latency, port=args.port)
    if args.fault_rate:
        server.set_fault_rate(args.fault_rate, [k for k in args.fault_kinds.split(",") if k], seed=args.seed)
    if args.rate_limit:
        n, _, rest = args.rate_limit.partition("/")
        seconds, _, retry_after = rest.partition("/")
        server.set_rate_limit(int(n), float(seconds or 60), retry_after or None)
    stats_on_stop = bool(args.rate_limit)

    done = threading.Event()

    def _on_signal(signum: int, _frame: Any) -> None:
        done.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            server.start()
        except OSError as exc:
            print(f"fake_openai: cannot listen on {HOST}:{args.port}: {exc}", file=sys.stderr)
            return 1
        print(server.url, flush=True)
        print(f"fake_openai: serving on {server.url} (Ctrl-C or SIGTERM to stop)", file=sys.stderr, flush=True)
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"fake_openai: stopped after {server.request_count} requests"
          + (f", {server.rate_limited} answered 429 by the rate limit" if stats_on_stop else ""),
          file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
