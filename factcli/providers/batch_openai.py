"""OpenAI's Batch API through the `openai` SDK: the lines go up as a JSONL file (purpose "batch"), a
batch is made of it (completion window 24h), polled, and its output and error files read back.
Written from OpenAI's API reference (Files, Batch); any server that speaks it (a gateway, the test
suite's stand-in) is reached at the provider's base URL.

OpenAI's limits: 50,000 lines and 200 MB per batch file, one model per batch.
"""

from __future__ import annotations

import json

from factcli.providers.batch_api import ENDED, RUNNING, BatchState, LineResult

_ENDED = {"completed", "failed", "expired", "cancelled"}  # validating, in_progress, finalizing, cancelling: not yet


class OpenAIBatches:
    kind = "openai"
    max_lines = 50_000
    max_bytes = 200 * 1024 * 1024

    def __init__(self, base_url: str, api_key: str, url: str, headers: dict | None = None):
        self.base_url = base_url.rstrip("/")
        self.url = url  # the endpoint every line of a batch is for: /v1/chat/completions
        self._key = api_key
        self._headers = {k: v for k, v in (headers or {}).items()
                         if k.lower() not in ("authorization", "content-type")}
        self._client = None

    def _api(self):
        if self._client is None:
            from openai import AsyncOpenAI

            # retries of these few requests: the SDK's own (connection errors, 429, 5xx)
            self._client = AsyncOpenAI(base_url=self.base_url, api_key=self._key,
                                       default_headers=self._headers or None, max_retries=4)
        return self._client

    def line(self, custom_id: str, body: dict) -> bytes:
        return json.dumps({"custom_id": custom_id, "method": "POST", "url": self.url, "body": body},
                          separators=(",", ":")).encode() + b"\n"

    async def submit(self, lines: list[tuple[str, dict]], tag: str = "") -> str:
        data = b"".join(self.line(cid, body) for cid, body in lines)
        api = self._api()
        upload = await api.files.create(file=("factcli-batch.jsonl", data), purpose="batch")
        batch = await api.batches.create(input_file_id=upload.id, endpoint=self.url, completion_window="24h",
                                         metadata={"made_by": "factcli", "factcli_submission": tag})
        return batch.id

    async def find(self, tag: str) -> str | None:
        """The batch submitted with this tag (its metadata), among the account's newest 1,000, or None."""
        seen = 0
        async for b in self._api().batches.list(limit=100):
            if (b.metadata or {}).get("factcli_submission") == tag:
                return b.id
            seen += 1
            if seen >= 1000:
                break
        return None

    async def status(self, batch_id: str) -> BatchState:
        b = await self._api().batches.retrieve(batch_id)
        counts = b.request_counts
        total, done, failed = (counts.total, counts.completed, counts.failed) if counts else (0, 0, 0)
        error = None
        if b.status == "failed" and b.errors and b.errors.data:
            first = b.errors.data[0]
            where = f" (line {first.line})" if getattr(first, "line", None) is not None else ""
            error = f"{first.code or 'failed'}: {first.message}{where}"
        return BatchState(ENDED if b.status in _ENDED else RUNNING, b.status, total, done, failed, error)

    async def results(self, batch_id: str) -> dict[str, LineResult]:
        api = self._api()
        b = await api.batches.retrieve(batch_id)
        out: dict[str, LineResult] = {}
        for file_id in (b.output_file_id, b.error_file_id):
            if not file_id:
                continue
            content = await api.files.content(file_id)
            for raw in content.text.splitlines():
                if raw.strip():
                    cid, result = _read_line(raw)
                    if cid is not None:
                        out[cid] = result
        return out

    async def cancel(self, batch_id: str) -> None:
        await self._api().batches.cancel(batch_id)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def _read_line(raw: str) -> tuple[str | None, LineResult]:
    """One line of an output or error file: {custom_id, response: {status_code, body}, error}."""
    try:
        line = json.loads(raw)
    except ValueError:
        return None, LineResult(None, "unreadable line")
    cid = line.get("custom_id")
    error = line.get("error")
    response = line.get("response") or {}
    if isinstance(error, dict) and error:  # expired, cancelled, or the request could not be made
        code = str(error.get("code") or "error")
        return cid, LineResult(None, f"{code}: {error.get('message') or ''}".strip(), True)
    status = int(response.get("status_code") or 0)
    body = response.get("body")
    if status == 200 and isinstance(body, dict):
        return cid, LineResult(body, None)
    detail = body.get("error", {}).get("message") if isinstance(body, dict) and isinstance(body.get("error"), dict) \
        else json.dumps(body)[:300]
    # a 4xx fails the same way when asked again (save 408/409/429); a 5xx may not
    retry = status >= 500 or status in (408, 409, 429)
    return cid, LineResult(None, f"HTTP {status}: {detail}", retry)
