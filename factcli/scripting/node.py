"""One long-lived Node.js worker per factcli process, for the JavaScript in promptfoo configs.

`javascript` assertions, JS `transform`s and `file://x.js` scoring functions all go through
`get_worker()`: a `node factcli/js/worker.js` subprocess started on first use and spoken to in
newline-delimited JSON with request ids, so any number of concurrent asyncio callers (and event
loops, one after another) share it. Its pipes are served by two daemon threads, never by an event
loop, so a call can be awaited from any loop or made synchronously.

Failure rules:
- no `node` executable: `NodeNotFound`, whose message says what needs Node and what to use instead;
- a call that takes longer than the timeout (FACTCLI_JS_TIMEOUT_MS, default 60 000) fails with
  `NodeTimeout`; if the worker then does not answer a ping it is killed (a runaway loop blocks
  every call) and the next call starts a fresh one;
- a worker that dies fails every call in flight with `NodeWorkerError` (none hangs) and is
  restarted once, on the next call; a second crash leaves JavaScript disabled for the process;
- `atexit` closes the worker's stdin and kills it if it has not exited a moment later.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import itertools
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from factcli.errors import FactcliError
from factcli.sources import TS_SUFFIXES

WORKER_JS = Path(__file__).with_name("js") / "worker.js"
DEFAULT_TIMEOUT_S = 60.0
START_TIMEOUT_S = 15.0
PING_TIMEOUT_S = 2.0
MAX_RESTARTS = 1
MIN_NODE_MAJOR = 18
STRIP_TYPES_SINCE = (22, 6)  # Node's own type stripping; behind --experimental-strip-types before 22.18/23.6
STRIP_TYPES_FLAG = "--experimental-strip-types"
# the config folders the worker looks for the `typescript` package in (also after a restart)
_TS_ROOTS: list[str] = []


class NodeWorkerError(Exception):
    """The worker could not run a call (not the user's code failing)."""


class NodeNotFound(NodeWorkerError, FactcliError):
    """No `node` executable: a user-fixable problem, reported as one line."""


class NodeTimeout(NodeWorkerError):
    pass


class JSError(Exception):
    """User JavaScript failed. `phase` says where: load (import / export lookup), call (the code
    threw), validate (a result of the wrong shape), compile (syntax)."""

    def __init__(self, phase: str, error: dict):
        self.phase = phase
        self.name = error.get("name") or "Error"
        self.js_message = error.get("message") or ""
        self.stack = error.get("stack") or f"{self.name}: {self.js_message}"
        self.result_error = bool(error.get("resultError"))
        super().__init__(self.js_message)


def node_command() -> str:
    """The node executable to run: FACTCLI_NODE (a path or a name on PATH), else `node`."""
    return os.environ.get("FACTCLI_NODE") or "node"


def node_missing_message(what: str = "javascript assertions", instead: str = "a python assertion") -> str:
    return (f"{what} need Node.js: install node (>=18) or use {instead} "
            f"(no '{node_command()}' executable found on PATH)")


def require_node(what: str = "javascript assertions", instead: str = "a python assertion") -> str:
    """Path of the node executable, or NodeNotFound naming what needed it."""
    path = shutil.which(node_command())
    if path is None:
        raise NodeNotFound(node_missing_message(what, instead))
    return path


def timeout_s() -> float:
    raw = os.environ.get("FACTCLI_JS_TIMEOUT_MS")
    if raw:
        try:
            return max(float(raw) / 1000.0, 0.001)
        except ValueError:
            pass
    return DEFAULT_TIMEOUT_S


class NodeWorker:
    def __init__(self, node: str | None = None, *, timeout: float | None = None,
                 max_restarts: int = MAX_RESTARTS, cwd: str | None = None, ping_timeout: float = PING_TIMEOUT_S):
        self._node = node
        self.timeout = timeout
        self.ping_timeout = ping_timeout
        self.max_restarts = max_restarts
        self.cwd = cwd
        self.crashes = 0
        self.starts = 0
        self.node_version: str | None = None
        self._lock = threading.RLock()
        self._outbox: queue.SimpleQueue | None = None  # lines for the current process's stdin
        self._ids = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future] = {}
        self._proc: subprocess.Popen | None = None
        self._ready: concurrent.futures.Future | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self._expected_exit: set[int] = set()  # pids we stopped on purpose
        self._last_crash: str | None = None
        self._last_kill_reason = "stopped"
        self._closed = False
        self.node_args: list[str] = []  # before the worker script: STRIP_TYPES_FLAG when TypeScript needs it
        self.strips_types = False

    # ------------------------------------------------------------ lifecycle

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _ensure_started(self) -> None:
        with self._lock:
            if self.alive and self._ready is not None and self._ready.done() and not self._ready.exception():
                return
            if self._closed:
                raise NodeWorkerError("the node worker has been shut down")
            if self.crashes > self.max_restarts:
                raise NodeWorkerError(f"the node worker crashed {self.crashes} times; javascript is disabled "
                                      f"for the rest of this run. Last crash: {self._last_crash}")
            self._start()

    def _start(self) -> None:
        node = self._node or require_node()
        if os.sep not in node and shutil.which(node) is None:
            raise NodeNotFound(node_missing_message())
        if not WORKER_JS.is_file():
            raise NodeWorkerError(f"factcli's node worker script is missing: {WORKER_JS} "
                                  "(reinstall factcli; its package data must include js/worker.js)")
        try:
            proc = subprocess.Popen(
                [node, *self.node_args, str(WORKER_JS), json.dumps({"tsRoots": _TS_ROOTS, "tsSuffixes": TS_SUFFIXES})], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.cwd,
            )
        except FileNotFoundError:
            raise NodeNotFound(node_missing_message()) from None
        except OSError as exc:
            raise NodeWorkerError(f"cannot start node ({node}): {exc}") from None
        self._proc = proc
        self._ready = concurrent.futures.Future()
        self._outbox = queue.SimpleQueue()
        self.starts += 1
        threading.Thread(target=self._read_stdout, args=(proc, self._ready, self._outbox), daemon=True,
                         name=f"factcli-node-out-{proc.pid}").start()
        threading.Thread(target=self._write_stdin, args=(proc, self._outbox), daemon=True,
                         name=f"factcli-node-in-{proc.pid}").start()
        threading.Thread(target=self._read_stderr, args=(proc,), daemon=True,
                         name=f"factcli-node-err-{proc.pid}").start()
        try:
            hello = self._ready.result(START_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            self._kill(proc, "the node worker did not start in time")
            raise NodeWorkerError(f"the node worker did not start within {START_TIMEOUT_S:g}s") from None
        except NodeWorkerError:
            raise
        version = str(hello.get("node") or "")
        self.node_version = version
        self.strips_types = bool(hello.get("stripsTypes"))
        try:
            major = int(version.split(".")[0])
        except ValueError:
            major = MIN_NODE_MAJOR
        if major < MIN_NODE_MAJOR:
            self._kill(proc, "node is too old")
            self._closed = True
            raise NodeNotFound(f"javascript assertions need Node.js >= {MIN_NODE_MAJOR}; {node} is v{version}")
        _register_atexit()

    def enable_type_stripping(self) -> None:
        """A Node that has type stripping but not on by default (22.6 to 22.17, 23.0 to 23.5) is started
        again with the flag, before any of the run's calls (a config's code is checked as it loads)."""
        self._ensure_started()
        if self.strips_types or STRIP_TYPES_FLAG in self.node_args or _version(self.node_version) < STRIP_TYPES_SINCE:
            return
        with self._lock:
            proc, self.node_args = self._proc, [*self.node_args, STRIP_TYPES_FLAG]
        if proc is not None:
            self._kill(proc, "restarted with TypeScript type stripping")
            proc.wait(5)
        self._ensure_started()

    def _kill(self, proc: subprocess.Popen, reason: str) -> None:
        """Stop `proc` on purpose; calls in flight on it fail with `reason`."""
        with self._lock:
            self._expected_exit.add(proc.pid)
            self._last_kill_reason = reason
        try:
            proc.kill()
            # reaped before returning: until then it still looks alive, and a call sent meanwhile would go
            # down with it
            proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass

    def shutdown(self, wait: float = 1.0) -> None:
        """Close stdin (the worker exits on EOF); kill it if it is still there after `wait` seconds."""
        with self._lock:
            self._closed = True
            proc, outbox = self._proc, self._outbox
            if proc is None:
                return
            self._expected_exit.add(proc.pid)
            self._last_kill_reason = "factcli is shutting down"
        if outbox is not None:
            outbox.put(None)  # after the requests already queued
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            try:
                proc.wait(wait)
            except subprocess.TimeoutExpired:
                pass

    # ------------------------------------------------------------ pipe threads

    def _write_stdin(self, proc: subprocess.Popen, outbox: queue.SimpleQueue) -> None:
        """Writes queued requests, so a worker too busy to read never blocks an event loop."""
        stream = proc.stdin
        assert stream is not None
        while True:
            item = outbox.get()
            if item is None:  # shutdown, or the process has exited: EOF tells the worker to exit
                try:
                    stream.close()
                except (OSError, ValueError):
                    pass
                break
            data, fut = item
            try:
                stream.write(data)
                stream.flush()
            except (OSError, ValueError) as exc:
                if not fut.done():
                    try:
                        fut.set_exception(NodeWorkerError(f"the node worker is not accepting calls: {exc}"))
                    except concurrent.futures.InvalidStateError:
                        pass

    def _read_stdout(self, proc: subprocess.Popen, ready: concurrent.futures.Future,
                     outbox: queue.SimpleQueue) -> None:
        stream = proc.stdout
        assert stream is not None
        for raw in iter(stream.readline, b""):
            try:
                msg = json.loads(raw)
            except ValueError:
                self._stderr_tail.append(raw.decode("utf-8", "replace").rstrip())
                continue
            if not isinstance(msg, dict):
                continue
            if msg.get("ready"):
                if not ready.done():
                    ready.set_result(msg)
                continue
            with self._lock:
                fut = self._pending.pop(msg.get("id"), None)
            if fut is not None and not fut.done():
                try:
                    fut.set_result(msg)
                except concurrent.futures.InvalidStateError:
                    pass
        code = proc.wait()
        outbox.put(None)
        with self._lock:
            deliberate = proc.pid in self._expected_exit
            self._expected_exit.discard(proc.pid)
            tail = "\n".join(list(self._stderr_tail)[-10:])
            if deliberate:
                message = f"the node worker was stopped: {self._last_kill_reason}"
            else:
                self.crashes += 1
                message = f"the node worker exited unexpectedly (exit code {code})"
                if tail:
                    message += f": {tail}"
                self._last_crash = message
            if self._proc is proc:
                self._proc = None
            pending = list(self._pending.items())
            # Only this process's calls: ids are unique across restarts, and a call is
            # registered only while its worker is the current one.
            for key, fut in pending:
                if getattr(fut, "_factcli_pid", None) == proc.pid:
                    self._pending.pop(key, None)
                    if not fut.done():
                        fut.set_exception(NodeWorkerError(message))
        if not ready.done():
            ready.set_exception(NodeWorkerError(f"the node worker failed to start (exit code {code})"
                                                + (f": {tail}" if tail else "")))

    def _read_stderr(self, proc: subprocess.Popen) -> None:
        from factcli import settings

        stream = proc.stderr
        assert stream is not None
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self._stderr_tail.append(line)
            if settings.debug():
                print(f"[node] {line}", file=sys.stderr)

    # ------------------------------------------------------------ calls

    def _submit(self, op: str, payload: dict) -> tuple[int, concurrent.futures.Future]:
        self._ensure_started()
        req_id = next(self._ids)
        try:
            line = json.dumps({"id": req_id, "op": op, **payload}, ensure_ascii=False, default=_json_default,
                              allow_nan=False)
        except ValueError:
            line = json.dumps({"id": req_id, "op": op, **_finite(payload)}, ensure_ascii=False,
                              default=_json_default)
        data = (line + "\n").encode("utf-8")
        with self._lock:
            proc, outbox = self._proc, self._outbox
            if proc is None or outbox is None or proc.poll() is not None:
                raise NodeWorkerError(self._last_crash or "the node worker is not running")
            fut: concurrent.futures.Future = concurrent.futures.Future()
            fut._factcli_pid = proc.pid  # type: ignore[attr-defined]
            self._pending[req_id] = fut
            outbox.put((data, fut))
        return req_id, fut

    def _forget(self, req_id: int) -> None:
        with self._lock:
            self._pending.pop(req_id, None)

    def _unwrap(self, msg: dict) -> dict:
        if msg.get("ok"):
            return msg
        raise JSError(msg.get("phase") or "call", msg.get("error") or {})

    def _effective_timeout(self, timeout: float | None) -> float:
        return timeout if timeout is not None else (self.timeout if self.timeout is not None else timeout_s())

    async def call(self, op: str, payload: dict | None = None, *, timeout: float | None = None) -> dict:
        """Run one op; returns the worker's answer (`value`, and flags) or raises JSError /
        NodeWorkerError. Safe to await from many tasks at once."""
        payload = payload or {}
        limit = self._effective_timeout(timeout)
        if not (self.alive and self._ready is not None and self._ready.done()):
            await asyncio.to_thread(self._ensure_started)
        req_id, fut = self._submit(op, payload)
        try:
            msg = await asyncio.wait_for(asyncio.wrap_future(fut), limit)
        except asyncio.TimeoutError:
            self._forget(req_id)
            # the check ends even when the caller's own deadline cancels this call meanwhile: a worker stuck
            # in a loop is stopped before the next call is sent to it
            check = asyncio.ensure_future(asyncio.to_thread(self._check_responsive, fut))
            try:
                await asyncio.shield(check)
            except asyncio.CancelledError:
                await asyncio.wait([check])
                raise
            raise NodeTimeout(f"javascript did not finish within {limit:g}s "
                              "(FACTCLI_JS_TIMEOUT_MS sets the limit)") from None
        return self._unwrap(msg)

    def call_sync(self, op: str, payload: dict | None = None, *, timeout: float | None = None) -> dict:
        """`call` for code that is not in an event loop (config loading)."""
        limit = self._effective_timeout(timeout)
        req_id, fut = self._submit(op, payload or {})
        try:
            msg = fut.result(limit)
        except concurrent.futures.TimeoutError:
            self._forget(req_id)
            self._check_responsive(fut)
            raise NodeTimeout(f"javascript did not finish within {limit:g}s") from None
        return self._unwrap(msg)

    def _check_responsive(self, timed_out: concurrent.futures.Future) -> None:
        """After a timeout: a worker that cannot answer a ping is stuck (a synchronous loop in user
        code blocks every call), so it is killed and the next call starts a new one."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        try:
            _, ping = self._submit("ping", {})
            ping.result(self.ping_timeout)
        except concurrent.futures.TimeoutError:
            self._kill(proc, "a javascript call timed out and the worker stopped responding")
        except Exception:
            pass


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, tuple)):
        return list(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _finite(value: Any) -> Any:
    """NaN and infinities become null, as JSON.stringify does."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _version(text: str | None) -> tuple[int, int]:
    try:
        major, minor = (text or "").split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return (0, 0)


class TypeScriptUnavailable(NodeNotFound):
    """Neither Node's type stripping nor the `typescript` package: the message says how to get either."""


def typescript_way(path: Path, root: Path | None = None) -> dict:
    """How the TypeScript file at `path` will run in the worker: `{"way": "node"}` (Node's own type
    stripping) or `{"way": "typescript", "from": …}` (the package found from `root`, the config's
    folder, or from the file's own folder). TypeScriptUnavailable (or NodeNotFound) when it cannot."""
    require_node("TypeScript files", "a .js file")
    if root is not None and str(root.resolve()) not in _TS_ROOTS:
        _TS_ROOTS.append(str(root.resolve()))
    worker = get_worker()
    worker.enable_type_stripping()
    try:
        answer = worker.call_sync("typescript", {"file": str(path.resolve()), "roots": _TS_ROOTS}, timeout=30)
    except JSError as exc:
        raise TypeScriptUnavailable(exc.js_message) from None
    return answer.get("value") or {}


def check_typescript(path: Path, file: str, where: str) -> None:
    """The load-time check every key that accepts a TypeScript file shares (config/user_code.py and
    the script assertions, which sit below config/): it can run, or one ConfigError naming both ways."""
    from factcli.errors import ConfigError

    try:
        typescript_way(path, Path(file).parent if file else None)
    except NodeWorkerError as exc:  # NodeNotFound, TypeScriptUnavailable, a worker that would not start
        raise ConfigError(str(exc), file, where) from None


# ---------------------------------------------------------------- the process-wide worker

_WORKER: NodeWorker | None = None
_WORKER_LOCK = threading.Lock()
_ATEXIT_REGISTERED = False


def get_worker() -> NodeWorker:
    """The shared worker (not started until its first call)."""
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            _WORKER = NodeWorker()
        return _WORKER


def _register_atexit() -> None:
    global _ATEXIT_REGISTERED
    with _WORKER_LOCK:
        if not _ATEXIT_REGISTERED:
            atexit.register(shutdown)
            _ATEXIT_REGISTERED = True


def shutdown() -> None:
    """Stop the shared worker (registered with atexit once a worker has started)."""
    global _WORKER
    with _WORKER_LOCK:
        worker, _WORKER = _WORKER, None
    if worker is not None:
        worker.shutdown()


def js_value(answer: dict) -> Any:
    """The value of a worker answer, with the non-finite numbers JSON cannot carry restored."""
    special = answer.get("special")
    if special is not None:
        return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.get(special, float("nan"))
    return answer.get("value")
