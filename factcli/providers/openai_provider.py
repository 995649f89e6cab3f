"""`openai:` ids (OpenAI itself, and any OpenAI-compatible server via apiBaseUrl / OPENAI_BASE_URL:
vLLM, llama.cpp, Ollama's /v1) through the official `openai` SDK on its aiohttp transport.

Measured here it is far faster than going through litellm (whose import alone costs ~3 s and
~4 ms of CPU per call), so litellm stays for the other vendors. Retries belong to factcli.calls
(max_retries=0 here). Parameters a model rejects (temperature on reasoning models, max_tokens
where max_completion_tokens is wanted) are dropped or renamed and the call is made again, once per
parameter, as litellm's drop_params would.
"""

from __future__ import annotations

import json
import os
import re

from factcli.providers import (AUTH, ERROR, RATE_LIMIT, TRANSIENT, Provider, ProviderCallError, RenderedPrompt,
                               register_provider)
from factcli.providers.litellm_provider import KINDS, PASSTHROUGH
from factcli.types import ProviderResponse, TokenUsage
from factcli import pricing

_clients: dict[tuple, object] = {}


def _model_of(pid: str) -> tuple[str, str]:
    """`openai:chat:gpt-5` -> ("chat", "gpt-5"); `openai:gpt-5` -> ("chat", "gpt-5")."""
    rest = pid.split(":", 1)[1]
    first, _, remainder = rest.partition(":")
    if first in KINDS and remainder:
        return ("completion" if first == "completion" else "chat"), remainder
    return "chat", rest


async def aclose_all() -> None:
    """Close the clients (their aiohttp sessions) made on the running loop."""
    import asyncio

    loop_id = id(asyncio.get_running_loop())
    for ident in [k for k in _clients if k[-1] == loop_id]:
        client = _clients.pop(ident)
        try:
            await client.close()
        except Exception:  # closing is best effort at the end of a run
            pass


def _is_openai(pid: str) -> bool:
    if not pid.startswith("openai:"):
        return False
    rest = pid.split(":", 1)[1]
    return not rest.startswith(("embedding:", "embeddings:", "image:", "moderation:", "assistant:", "realtime:"))


@register_provider(_is_openai)
class OpenAIProvider(Provider):
    def __init__(self, spec, base_dir=None):
        super().__init__(spec, base_dir)
        self.kind, self.model = _model_of(spec.id)

    @staticmethod
    def validate(spec, base_dir) -> None:
        from factcli.errors import ConfigError

        kind, model = _model_of(spec.id)
        if not model or any(ch.isspace() for ch in model):
            raise ConfigError(f"provider id '{spec.id}' needs a model name, e.g. openai:chat:gpt-5-mini")

    def base_url(self) -> str | None:
        return (self.config.get("apiBaseUrl") or os.environ.get("OPENAI_BASE_URL")
                or os.environ.get("OPENAI_API_BASE") or None)

    def cache_identity(self) -> dict:
        return {"id": self.id, "model": self.model, "config": self.config, "base_url": self.base_url()}

    def _api_key(self) -> str:
        key = self.config.get("apiKey")
        if not key and self.config.get("apiKeyEnvar"):
            key = os.environ.get(str(self.config["apiKeyEnvar"]))
        key = key or os.environ.get("OPENAI_API_KEY")
        if not key and self.base_url():
            key = "no-key"  # local OpenAI-compatible servers often need none; the client insists
        if not key:
            raise ProviderCallError(f"{self.id}: no API key: set OPENAI_API_KEY, or apiKey / apiKeyEnvar in the "
                                    "provider's config", AUTH)
        return key

    def _client(self, timeout: float):
        """One client (one aiohttp session) per endpoint, key and event loop; connections are reused."""
        import asyncio

        from openai import AsyncOpenAI, DefaultAioHttpClient

        key = self._api_key()
        loop = asyncio.get_running_loop()
        ident = (self.base_url(), key, self.config.get("organization"), id(loop))
        client = _clients.get(ident)
        if client is None:
            headers = self.config.get("headers") or None
            client = AsyncOpenAI(api_key=key, base_url=self.base_url(), organization=self.config.get("organization"),
                                 max_retries=0, timeout=timeout, default_headers=headers,
                                 http_client=DefaultAioHttpClient(timeout=timeout))
            _clients[ident] = client
        return client

    def _params(self, context: dict) -> dict:
        params = {k: v for k, v in self.config.items() if k in PASSTHROUGH}
        params.update({k: v for k, v in (context.get("overrides") or {}).items() if k != "drop_params"})
        if "max_completion_tokens" in params:
            params.pop("max_tokens", None)
        return params

    async def call(self, prompt: RenderedPrompt, context: dict) -> ProviderResponse:
        import openai

        timeout = float(context.get("timeout_s", 300))
        client = self._client(timeout)
        params = self._params(context)
        dropped: list[str] = []
        for _ in range(4):  # at most a few parameters to drop or rename
            try:
                if self.kind == "completion":
                    resp = await client.completions.create(model=self.model, prompt=prompt.text, **params)
                else:
                    resp = await client.chat.completions.create(model=self.model, messages=prompt.messages, **params)
                break
            except openai.BadRequestError as exc:
                fixed = _fix_unsupported(exc, params)
                if fixed is None:
                    raise classify_openai(exc) from None
                dropped.append(fixed)
            except Exception as exc:
                raise classify_openai(exc) from None
        else:
            raise ProviderCallError(f"{self.id}: the model rejected parameters {dropped}", ERROR)
        return self._response(resp, dropped)

    def _response(self, resp, dropped: list[str]) -> ProviderResponse:
        choice = resp.choices[0]
        if self.kind == "completion":
            output = choice.text
        else:
            message = choice.message
            output = message.content
            if message.tool_calls and not output:
                output = [tc.model_dump() for tc in message.tool_calls]
        usage = resp.usage
        tokens = TokenUsage(num_requests=1)
        if usage is not None:
            tokens.prompt = int(usage.prompt_tokens or 0)
            tokens.completion = int(usage.completion_tokens or 0)
            tokens.total = int(usage.total_tokens or tokens.prompt + tokens.completion)
            details = getattr(usage, "prompt_tokens_details", None)
            tokens.cached = int(getattr(details, "cached_tokens", 0) or 0) if details else 0
        logprobs = None
        lp = getattr(choice, "logprobs", None)
        if lp is not None and getattr(lp, "content", None):
            logprobs = [float(t.logprob) for t in lp.content]
        cost = pricing.cost(self.model, tokens.prompt, tokens.completion) if usage is not None else None
        meta = {"droppedParams": dropped} if dropped else {}
        return ProviderResponse(output=output if output is not None else "", token_usage=tokens, cost=cost,
                                finish_reason=choice.finish_reason, logprobs=logprobs, metadata=meta)


_UNSUPPORTED = re.compile(r"[Uu]nsupported (?:parameter|value): '([A-Za-z_]+)'")


def _fix_unsupported(exc, params: dict) -> str | None:
    """Drop (or rename) the parameter a 400 complains about; None when it is something else."""
    body = getattr(exc, "body", None)
    param = body.get("param") if isinstance(body, dict) else None
    if not param:
        m = _UNSUPPORTED.search(str(exc))
        param = m.group(1) if m else None
    if not param or param not in params:
        return None
    value = params.pop(param)
    if param == "max_tokens":
        params["max_completion_tokens"] = value
    return param


def _retry_after(exc) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) if response is not None else None
    value = headers.get("retry-after") if headers is not None else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from email.utils import parsedate_to_datetime
        import time

        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def classify_openai(exc: Exception) -> ProviderCallError:
    import openai

    message = str(exc).strip() or type(exc).__name__
    if len(message) > 1000:
        message = message[:1000] + "…"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status == 429:
            return ProviderCallError(message, RATE_LIMIT, status, _retry_after(exc))
        if status in (401, 403):
            return ProviderCallError(message, AUTH, status)
        if status >= 500 or status in (408, 409):
            return ProviderCallError(message, TRANSIENT, status, _retry_after(exc))
        return ProviderCallError(message, ERROR, status)
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return ProviderCallError(message, TRANSIENT)
    if isinstance(exc, (json.JSONDecodeError, ValueError)):  # a 200 whose body is not JSON
        return ProviderCallError(f"malformed response: {message}", TRANSIENT)
    return ProviderCallError(f"{type(exc).__name__}: {message}", ERROR)
