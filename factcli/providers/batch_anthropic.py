"""Anthropic's Message Batches API through the `anthropic` SDK: lines go up as
`{custom_id, params}` requests (params: a Messages API request), the batch is polled
(`processing_status` in_progress | canceling | ended, `request_counts`), its results read as JSONL
(`result.type` succeeded | errored | canceled | expired). Written from Anthropic's API reference; the
base URL is the provider's (`apiBaseUrl`, else ANTHROPIC_BASE_URL), so a gateway or the test suite's
stand-in is reached.

Anthropic's limits: 100,000 requests or 256 MB per batch; custom_id 1-64 of [a-zA-Z0-9_-].
"""

from __future__ import annotations

import json

from factcli.providers.batch_api import ENDED, RUNNING, BatchState, LineResult

STRUCTURED = "structured-outputs-2025-11-13"  # the beta a request with `output_format` needs (as litellm sends it)


class AnthropicBatches:
    kind = "anthropic"
    max_lines = 100_000
    max_bytes = 256 * 1024 * 1024

    def __init__(self, base_url: str | None, api_key: str | None):
        self.base_url = base_url
        self._key = api_key
        self._client = None

    def _api(self):
        if self._client is None:
            from anthropic import AsyncAnthropic

            self._client = AsyncAnthropic(api_key=self._key, base_url=self.base_url, max_retries=4)
        return self._client

    def line(self, custom_id: str, params: dict) -> bytes:
        return json.dumps({"custom_id": custom_id, "params": params}, separators=(",", ":")).encode()

    async def submit(self, lines: list[tuple[str, dict]], tag: str = "") -> str:
        # (Anthropic's batches carry no metadata: a batch recorded but not yet acknowledged when the run
        # stopped cannot be found again, and its lines are submitted again: BatchClient.find)
        requests = [{"custom_id": cid, "params": params} for cid, params in lines]
        batches = self._api().beta.messages.batches
        if any("output_format" in params for _, params in lines):
            batch = await batches.create(requests=requests, betas=[STRUCTURED])
        else:
            batch = await batches.create(requests=requests)
        return batch.id

    async def status(self, batch_id: str) -> BatchState:
        b = await self._api().messages.batches.retrieve(batch_id)
        c = b.request_counts
        done = c.succeeded + c.errored + c.canceled + c.expired
        total = done + c.processing
        return BatchState(ENDED if b.processing_status == "ended" else RUNNING, b.processing_status, total,
                          c.succeeded, c.errored + c.canceled + c.expired)

    async def results(self, batch_id: str) -> dict[str, LineResult]:
        out: dict[str, LineResult] = {}
        async for entry in await self._api().messages.batches.results(batch_id):
            result = entry.result
            if result.type == "succeeded":
                out[entry.custom_id] = LineResult(result.message.model_dump(mode="json"), None)
            elif result.type == "errored":
                error = getattr(result.error, "error", None)
                kind = getattr(error, "type", "error")
                message = getattr(error, "message", "") or ""
                # invalid_request_error fails the same way again; api_error, overloaded_error may not
                out[entry.custom_id] = LineResult(None, f"{kind}: {message}", kind != "invalid_request_error")
            else:  # canceled, expired: never processed
                out[entry.custom_id] = LineResult(None, f"the line was {result.type}", True)
        return out

    async def cancel(self, batch_id: str) -> None:
        await self._api().messages.batches.cancel(batch_id)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


_NOT_SENT = ("timeout", "api_base", "api_key", "num_retries", "drop_params", "json_mode")


def params_of(model: str, kwargs: dict, messages: list) -> dict:
    """litellm's arguments of a direct call (OpenAI's form) as a Messages API request, by litellm's own
    AnthropicConfig: the transformation its direct call goes through."""
    from litellm.llms.anthropic.chat.transformation import AnthropicConfig

    config = AnthropicConfig()
    asked = {k: v for k, v in kwargs.items() if k not in _NOT_SENT}
    optional = config.map_openai_params(non_default_params=asked, optional_params={}, model=model, drop_params=True)
    body = config.transform_request(model=model, messages=messages, optional_params=dict(optional),
                                    litellm_params={}, headers={})
    body["model"] = model
    for key in list(body):
        if key not in _PARAMS:  # litellm's own bookkeeping (json_mode): not a Messages API parameter
            body.pop(key)
    body.setdefault("max_tokens", 4096)
    return body


# the Messages API's request parameters (Anthropic's reference)
_PARAMS = {"model", "messages", "max_tokens", "system", "temperature", "top_p", "top_k", "stop_sequences",
           "metadata", "tools", "tool_choice", "thinking", "output_format", "service_tier", "container", "mcp_servers"}


def model_response(message: dict, sent: dict):
    """An Anthropic message (a batch line's result) as litellm's ModelResponse, read by litellm's reader."""
    import httpx
    import litellm
    from litellm.llms.anthropic.chat.transformation import AnthropicConfig

    return AnthropicConfig().transform_parsed_response(
        completion_response=message, raw_response=httpx.Response(200, json=message),
        model_response=litellm.ModelResponse(), json_mode="output_format" in sent)
