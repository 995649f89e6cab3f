"""A stand-in for OpenAI's Files and Batch APIs, on the chat stand-in (tests/fake_openai.py), reached by
the real `openai` SDK. Written from OpenAI's API reference:

* ``POST /v1/files`` (multipart: ``file``, ``purpose``), ``GET /v1/files/{id}``, ``GET /v1/files/{id}/content``;
* ``POST /v1/batches`` {input_file_id, endpoint, completion_window: "24h", metadata},
  ``GET /v1/batches/{id}``, ``GET /v1/batches``, ``POST /v1/batches/{id}/cancel``.

A batch goes validating -> in_progress -> finalizing -> completed; or failed (a line that is not JSON,
lacks custom_id/method/url/body, repeats a custom_id, names a url other than the batch's endpoint, or
another model than the first line's: ``errors.data`` names the line); or expired (lines not answered
within the window: ``expire_after`` lines answered, the rest in the error file with code
``batch_expired``); or cancelling -> cancelled (the lines not yet answered in the error file with code
``batch_cancelled``). Answered lines go to the output file ``{id, custom_id, response: {status_code,
request_id, body}, error: null}``; lines whose request failed (a fault queued on the chat stand-in: 400,
500) go to the error file with their status and error body, as OpenAI writes them.

Each line is answered by the chat stand-in itself (a request to its own /v1/chat/completions), so a
batched reply is what the same request answered directly: its rules, its faults, its usage.

Knobs, so tests never wait: ``step_s`` (seconds between states, default 0), ``hold()``/``release()``
(batches stay in_progress until released), ``expire_after`` (the next batch processed expires once it
has answered that many lines), ``poll_faults`` (the next that many reads of a batch are answered 503). Counts: ``batch_lines`` (every custom_id
submitted, in order, over all batches), ``line_bodies`` (every line's body), ``batches``.
"""

from __future__ import annotations

import asyncio
import email.parser
import email.policy
import hashlib
import json
import time
from typing import Any

import aiohttp
from aiohttp import web

from fake_openai import FakeOpenAI, _error_body, _json

ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses")


class _Held:
    """The knobs both batch stand-ins share: `hold()` keeps every batch in progress until `release()`
    (called from the test's thread; the server's loop is woken through `_released`)."""

    _held = False
    _released: asyncio.Event | None = None

    def hold(self) -> None:
        self._held = True

    def release(self) -> None:
        self._held = False
        if self._loop is not None and self._released is not None:
            self._loop.call_soon_threadsafe(self._released.set)


class FakeBatchOpenAI(_Held, FakeOpenAI):
    def __init__(self, *args: Any, step_s: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.step_s = step_s
        self.expire_after: int | None = None
        self.poll_faults = 0  # the next GET /v1/batches/{id} answered 503 this many times
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.batch_lines: list[str] = []
        self.line_bodies: list[dict] = []
        self._released: asyncio.Event | None = None
        self._held = False
        self._counter = 0

    # ------------------------------------------------------------------ knobs (any thread)


    def statuses(self) -> dict[str, str]:
        return {bid: b["status"] for bid, b in self.batches.items()}

    # ------------------------------------------------------------------ routes

    def _more_routes(self, app: web.Application) -> None:
        self._released = asyncio.Event()
        for prefix in ("/v1", ""):
            app.router.add_post(prefix + "/files", self._upload)
            app.router.add_get(prefix + "/files/{id}", self._file)
            app.router.add_get(prefix + "/files/{id}/content", self._file_content)
            app.router.add_post(prefix + "/batches", self._create_batch)
            app.router.add_get(prefix + "/batches", self._list_batches)
            app.router.add_get(prefix + "/batches/{id}", self._get_batch)
            app.router.add_post(prefix + "/batches/{id}/cancel", self._cancel_batch)

    def _new_id(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}_{self._counter:06d}{hashlib.sha256(str(time.time()).encode()).hexdigest()[:8]}"

    def _file_object(self, f: dict) -> dict:
        return {"id": f["id"], "object": "file", "bytes": len(f["data"]), "created_at": f["created_at"],
                "filename": f["filename"], "purpose": f["purpose"], "status": "processed"}

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        head = f"Content-Type: {request.headers.get('Content-Type', '')}\r\n\r\n".encode()
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
        fields: dict[str, tuple[str | None, bytes]] = {}
        if message.is_multipart():
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                if name:
                    fields[name] = (part.get_filename(), part.get_payload(decode=True) or b"")
        if "file" not in fields or "purpose" not in fields:
            return _json(_error_body(400, "'file' and 'purpose' are required"), status=400)
        purpose = fields["purpose"][1].decode()
        if purpose not in ("batch", "fine-tune", "assistants", "vision", "user_data", "evals"):
            return _json(_error_body(400, f"Invalid purpose: {purpose}"), status=400)
        f = {"id": self._new_id("file"), "data": fields["file"][1], "filename": fields["file"][0] or "upload",
             "purpose": purpose, "created_at": int(time.time())}
        self.files[f["id"]] = f
        return _json(self._file_object(f))

    async def _file(self, request: web.Request) -> web.StreamResponse:
        f = self.files.get(request.match_info["id"])
        if f is None:
            return _json(_error_body(404, "No such File object"), status=404)
        return _json(self._file_object(f))

    async def _file_content(self, request: web.Request) -> web.StreamResponse:
        f = self.files.get(request.match_info["id"])
        if f is None:
            return _json(_error_body(404, "No such File object"), status=404)
        return web.Response(body=f["data"], content_type="application/octet-stream")

    async def _create_batch(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        if not isinstance(body, dict):
            return _json(_error_body(400, "Request body must be a JSON object."), status=400)
        f = self.files.get(str(body.get("input_file_id")))
        if f is None:
            return _json(_error_body(400, f"No file with id {body.get('input_file_id')!r}"), status=400)
        if f["purpose"] != "batch":
            return _json(_error_body(400, "The input file must have purpose 'batch'"), status=400)
        if body.get("endpoint") not in ENDPOINTS:
            return _json(_error_body(400, f"Invalid endpoint: {body.get('endpoint')!r}"), status=400)
        if body.get("completion_window") != "24h":
            return _json(_error_body(400, "completion_window must be '24h'"), status=400)
        now = int(time.time())
        batch = {"id": self._new_id("batch"), "object": "batch", "endpoint": body["endpoint"], "errors": None,
                 "input_file_id": f["id"], "completion_window": "24h", "status": "validating",
                 "output_file_id": None, "error_file_id": None, "created_at": now, "in_progress_at": None,
                 "expires_at": now + 86400, "finalizing_at": None, "completed_at": None, "failed_at": None,
                 "expired_at": None, "cancelling_at": None, "cancelled_at": None,
                 "request_counts": {"total": 0, "completed": 0, "failed": 0},
                 "metadata": body.get("metadata")}
        self.batches[batch["id"]] = batch
        asyncio.ensure_future(self._process(batch, f["data"]))
        return _json(batch)

    async def _list_batches(self, request: web.Request) -> web.StreamResponse:
        data = list(self.batches.values())[::-1]
        return _json({"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                      "last_id": data[-1]["id"] if data else None, "has_more": False})

    async def _get_batch(self, request: web.Request) -> web.StreamResponse:
        if self.poll_faults > 0:  # the vendor out of reach for a while (503, retry at once)
            self.poll_faults -= 1
            return _json(_error_body(503, "Service Unavailable"), status=503, headers={"retry-after-ms": "1"})
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return _json(_error_body(404, "No such Batch object"), status=404)
        return _json(batch)

    async def _cancel_batch(self, request: web.Request) -> web.StreamResponse:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return _json(_error_body(404, "No such Batch object"), status=404)
        if batch["status"] in ("validating", "in_progress", "finalizing"):
            batch["status"], batch["cancelling_at"] = "cancelling", int(time.time())
        elif batch["status"] not in ("cancelling", "cancelled"):
            return _json(_error_body(409, f"Cannot cancel a batch with status '{batch['status']}'"), status=409)
        return _json(batch)

    # ------------------------------------------------------------------ processing

    async def _process(self, batch: dict, data: bytes) -> None:
        await asyncio.sleep(self.step_s)
        lines, problem = _validate(data, batch["endpoint"])
        if problem is not None:
            batch["status"], batch["failed_at"] = "failed", int(time.time())
            batch["errors"] = {"object": "list", "data": [problem]}
            return
        for line in lines:
            self.batch_lines.append(line["custom_id"])
            self.line_bodies.append(line["body"])
        counts = batch["request_counts"]
        counts["total"] = len(lines)
        if batch["status"] == "validating":
            batch["status"], batch["in_progress_at"] = "in_progress", int(time.time())
        while self._held and batch["status"] == "in_progress":
            self._released.clear()
            if not self._held:
                break
            await self._released.wait()
        out, err = [], []
        pending = list(lines)
        answered = 0
        expire_after, self.expire_after = self.expire_after, None  # one batch expires
        async with aiohttp.ClientSession() as session:
            while pending and batch["status"] == "in_progress":
                if expire_after is not None and answered >= expire_after:
                    break
                line = pending.pop(0)
                status, reply = await self._answer_line(session, batch["endpoint"], line["body"])
                entry = {"id": self._new_id("batch_req"), "custom_id": line["custom_id"],
                         "response": {"status_code": status, "request_id": self._new_id("req"), "body": reply},
                         "error": None}
                (out if status == 200 else err).append(entry)
                counts["completed" if status == 200 else "failed"] += 1
                answered += 1
                if answered % 50 == 0:
                    await asyncio.sleep(0)
        if pending:
            code, word = (("batch_cancelled", "cancelled") if batch["status"] == "cancelling"
                          else ("batch_expired", "expired"))
            for line in pending:
                err.append({"id": self._new_id("batch_req"), "custom_id": line["custom_id"], "response": None,
                            "error": {"code": code, "message": f"This request could not be executed before the "
                                      f"batch was {word}."}})
                counts["failed"] += 1
            final = word
        else:
            batch["status"], batch["finalizing_at"] = "finalizing", int(time.time())
            await asyncio.sleep(self.step_s)
            final = "completed"
        for entries, key in ((out, "output_file_id"), (err, "error_file_id")):
            if entries:
                fid = self._new_id("file")
                self.files[fid] = {"id": fid, "data": "".join(json.dumps(e) + "\n" for e in entries).encode(),
                                   "filename": f"{batch['id']}_{key}.jsonl", "purpose": "batch_output",
                                   "created_at": int(time.time())}
                batch[key] = fid
        batch["status"], batch[f"{final}_at"] = final, int(time.time())

    async def _answer_line(self, session: aiohttp.ClientSession, endpoint: str, body: dict) -> tuple[int, Any]:
        """The line's request, made to this stand-in's own endpoint: the reply a direct call would get."""
        url = f"http://127.0.0.1:{self.port}{endpoint}"
        async with session.post(url, json=body, headers={"X-Fake-Batch-Line": "1"}) as resp:
            text = await resp.text()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return 500, {"error": {"message": text[:200], "type": "server_error"}}


def _validate(data: bytes, endpoint: str) -> tuple[list[dict], dict | None]:
    """The input file's lines, or the first problem as OpenAI's batch `errors.data` item names it."""
    lines: list[dict] = []
    seen: set[str] = set()
    model = None

    def problem(code: str, message: str, n: int, param: str | None = None) -> tuple[list, dict]:
        return [], {"code": code, "message": message, "param": param, "line": n}

    for n, raw in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            return problem("invalid_json_line", "This line is not parseable as valid JSON.", n)
        if not isinstance(line, dict) or not all(k in line for k in ("custom_id", "method", "url", "body")):
            return problem("missing_required_parameter", "Each line needs custom_id, method, url and body.", n)
        if line["custom_id"] in seen:
            return problem("duplicate_custom_id", "The custom_id for this request is a duplicate of another "
                           "request. These fields need to be unique across all requests in the batch.", n,
                           "custom_id")
        if line["method"] != "POST":
            return problem("invalid_method", "Only POST is supported.", n, "method")
        if line["url"] != endpoint:
            return problem("mismatched_endpoint", f"The provided URL '{line['url']}' does not match the batch "
                           f"endpoint '{endpoint}'.", n, "url")
        body = line["body"]
        if not isinstance(body, dict) or not body.get("model"):
            return problem("missing_required_parameter", "The request body needs a model.", n, "body.model")
        if model is not None and body["model"] != model:
            return problem("mismatched_model", "All requests in a batch must use the same model.", n, "body.model")
        model = body["model"]
        seen.add(line["custom_id"])
        lines.append(line)
    if not lines:
        return problem("empty_file", "The input file has no requests.", 0)
    return lines, None


# ---------------------------------------------------------------------- Anthropic


from datetime import datetime, timedelta, timezone  # noqa: E402
import re  # noqa: E402

from fake_vendors import FakeVendors  # noqa: E402

_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _rfc3339(at: datetime | None) -> str | None:
    return at.isoformat().replace("+00:00", "Z") if at is not None else None


class FakeAnthropicBatches(_Held, FakeVendors):
    """Anthropic's Message Batches API on the vendors' stand-in (tests/fake_vendors.py), from Anthropic's API
    reference: ``POST /v1/messages/batches`` {requests: [{custom_id, params}]} (a custom_id outside
    ``^[a-zA-Z0-9_-]{1,64}$`` or repeated: 400 invalid_request_error; params are checked when the line is
    processed, as Anthropic does, so a bad one is an ``errored`` result), ``GET /v1/messages/batches/{id}``
    (processing_status in_progress | canceling | ended; request_counts processing, succeeded, errored,
    canceled, expired; results_url once ended), ``GET …/{id}/results`` (JSONL: {custom_id, result: {type:
    succeeded, message} | {type: errored, error} | {type: canceled} | {type: expired}}), ``POST …/{id}/cancel``.
    Each line is answered by the stand-in's own /v1/messages. Knobs: ``hold()``/``release()``,
    ``expire_after`` (the next batch expires after that many lines). Counts: ``batch_lines``."""

    name = "FakeAnthropicBatches"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: dict[str, dict] = {}
        self.results: dict[str, list[dict]] = {}
        self.batch_lines: list[str] = []
        self.expire_after: int | None = None
        self._held = False
        self._released: asyncio.Event | None = None


    def routes(self, app: web.Application) -> None:
        super().routes(app)
        self._released = asyncio.Event()
        app.router.add_post("/v1/messages/batches", self._create)
        app.router.add_get("/v1/messages/batches/{id}", self._get)
        app.router.add_get("/v1/messages/batches/{id}/results", self._results)
        app.router.add_post("/v1/messages/batches/{id}/cancel", self._cancel)

    @staticmethod
    def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
        return web.json_response({"type": "error", "error": {"type": kind, "message": message}}, status=status)

    async def _create(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            return self._error(400, "requests: Field required")
        seen = set()
        for i, r in enumerate(requests):
            cid = r.get("custom_id") if isinstance(r, dict) else None
            if not isinstance(cid, str) or not _CUSTOM_ID.match(cid):
                return self._error(400, f"requests.{i}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
            if cid in seen:
                return self._error(400, f"Duplicate custom_id {cid!r}: custom_ids must be unique within a batch")
            if not isinstance(r.get("params"), dict):
                return self._error(400, f"requests.{i}.params: Field required")
            seen.add(cid)
        now = datetime.now(timezone.utc)
        bid = f"msgbatch_{len(self.batches) + 1:04d}{hashlib.sha256(str(time.time()).encode()).hexdigest()[:12]}"
        batch = {"id": bid, "type": "message_batch", "processing_status": "in_progress",
                 "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0, "canceled": 0,
                                    "expired": 0},
                 "ended_at": None, "created_at": _rfc3339(now), "expires_at": _rfc3339(now + timedelta(hours=24)),
                 "archived_at": None, "cancel_initiated_at": None, "results_url": None}
        self.batches[bid] = batch
        self.batch_lines.extend(r["custom_id"] for r in requests)
        asyncio.ensure_future(self._process(batch, requests, request.headers.get("anthropic-beta")))
        return web.json_response(batch)

    async def _get(self, request: web.Request) -> web.StreamResponse:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return self._error(404, "Not found", "not_found_error")
        return web.json_response(batch)

    async def _results(self, request: web.Request) -> web.StreamResponse:
        bid = request.match_info["id"]
        batch = self.batches.get(bid)
        if batch is None or batch["processing_status"] != "ended":
            return self._error(404 if batch is None else 400, "Results are not available until the batch ends")
        text = "".join(json.dumps(line) + "\n" for line in self.results[bid])
        return web.Response(text=text, content_type="application/binary")

    async def _cancel(self, request: web.Request) -> web.StreamResponse:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return self._error(404, "Not found", "not_found_error")
        if batch["processing_status"] == "in_progress":
            batch["processing_status"] = "canceling"
            batch["cancel_initiated_at"] = _rfc3339(datetime.now(timezone.utc))
        return web.json_response(batch)

    async def _process(self, batch: dict, requests: list[dict], beta: str | None) -> None:
        while self._held and batch["processing_status"] == "in_progress":
            self._released.clear()
            if self._held:
                await self._released.wait()
        counts, lines = batch["request_counts"], []
        expire_after, self.expire_after = self.expire_after, None
        headers = {"x-api-key": "stand-in", "anthropic-version": "2023-06-01", **({"anthropic-beta": beta} if beta else {})}
        async with aiohttp.ClientSession() as session:
            for n, r in enumerate(requests):
                if batch["processing_status"] == "canceling":
                    result = {"type": "canceled"}
                elif expire_after is not None and n >= expire_after:
                    result = {"type": "expired"}
                else:
                    async with session.post(f"{self.url}/v1/messages", json=r["params"], headers=headers) as resp:
                        reply = await resp.json()
                    result = ({"type": "succeeded", "message": reply} if resp.status == 200
                              else {"type": "errored", "error": reply})
                counts["processing"] -= 1
                counts[{"succeeded": "succeeded", "errored": "errored", "canceled": "canceled",
                        "expired": "expired"}[result["type"]]] += 1
                lines.append({"custom_id": r["custom_id"], "result": result})
        self.results[batch["id"]] = lines
        batch["processing_status"], batch["ended_at"] = "ended", _rfc3339(datetime.now(timezone.utc))
        batch["results_url"] = f"{self.url}/v1/messages/batches/{batch['id']}/results"
