"""`openai:` ids (OpenAI itself, and any OpenAI-compatible server via apiBaseUrl / OPENAI_BASE_URL:
vLLM, llama.cpp, Ollama's /v1) as plain JSON over HTTP with aiohttp.

aiohttp directly costs a fraction of the CPU per call of the official openai SDK (which validates
every request and response with its models) and of litellm (slower still, and slow to import;
benchmarks/README.md has the figures). So OpenAI's protocol, one JSON POST, is spoken here directly
and litellm keeps the other vendors. Retries belong to factcli.run.calling.caller, and so does what to do about a parameter a model
rejects (temperature on reasoning models, max_tokens where max_completion_tokens is wanted): this
module names it (a PARAM error), run/calling/caller learns it once per endpoint and passes it back in the
request's `adaptations`. What a call asks (providers/request.CallRequest) becomes its JSON body in
`OpenAIProvider.body(request)`, the one translation a direct call and a batch line share.
"""

from __future__ import annotations

import json
import os

from factcli.providers import pricing, reasoning
from factcli.providers.base import (
    AUTH,
    CONTEXT,
    FORMAT,
    PARAM,
    TRANSIENT,
    Provider,
    ProviderCallError,
    adapt,
    has_userinfo,
    is_context_exceeded,
    key_problem,
    names_response_format,
    http_error,
    refused_parameter,
    register_provider,
)
from factcli.providers.dialects import served_with_grammar
from factcli.providers.litellm_provider import KINDS, PASSTHROUGH
from factcli.providers.request import CallRequest
from factcli.providers.tokens import counted_usage as count_usage
from factcli.types import ProviderResponse, TokenUsage


def _model_of(pid: str) -> tuple[str, str]:
    """`openai:chat:gpt-5` -> ("chat", "gpt-5"); `openai:gpt-5` -> ("chat", "gpt-5")."""
    rest = pid.split(":", 1)[1]
    first, _, remainder = rest.partition(":")
    if first in KINDS and remainder:
        return ("completion" if first == "completion" else "chat"), remainder
    return "chat", rest


def _is_openai(pid: str) -> bool:
    if not pid.startswith("openai:"):
        return False
    rest = pid.split(":", 1)[1]
    return not rest.startswith(("embedding:", "embeddings:", "image:", "moderation:", "assistant:", "realtime:"))


@register_provider(_is_openai)
class OpenAIProvider(Provider):
    batch_api = "openai"  # OpenAI's Batch API (run/calling/batches.py, providers/batch_openai.py)

    def __init__(self, spec, base_dir=None):
        super().__init__(spec, base_dir)
        self.kind, self.model = _model_of(spec.id)
        self.price_model = self.model
        self.local = pricing.is_local_url(self.base_url())

    @staticmethod
    def validate(spec, base_dir) -> None:
        from factcli.errors import ConfigError

        kind, model = _model_of(spec.id)
        if not model or any(ch.isspace() for ch in model):
            raise ConfigError(f"provider id '{spec.id}' needs a model name, e.g. openai:chat:gpt-5-mini")

    def preflight(self) -> list[str]:
        base = self.base_url()
        if has_userinfo(base):  # OPENAI_BASE_URL's (the config's is refused at load: config/providers)
            return [f"{self.id}: its base URL holds a user name or password before its host, which factcli does "
                    "not send: put the key in OPENAI_API_KEY, apiKey or apiKeyEnvar"]
        if base and not self.config.get("apiKeyEnvar"):
            return []  # a local OpenAI-compatible server: a key is sent only if there is one
        problem = key_problem(self.config, ("OPENAI_API_KEY",))
        return [problem] if problem else []

    def base_url(self) -> str | None:
        return (self.config.get("apiBaseUrl") or os.environ.get("OPENAI_BASE_URL")
                or os.environ.get("OPENAI_API_BASE") or None)

    def cache_identity(self) -> dict:
        return {"id": self.id, "model": self.model, "config": self.config, "base_url": self.base_url()}

    def server_url(self) -> str | None:
        return self.base_url()

    def endpoint(self) -> str:
        return f"{self.base_url() or 'https://api.openai.com/v1'} {self.model}"

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

    def _headers(self) -> dict:
        headers = {"Authorization": f"Bearer {self._api_key()}", "Content-Type": "application/json"}
        if self.config.get("organization"):
            headers["OpenAI-Organization"] = str(self.config["organization"])
        for k, v in (self.config.get("headers") or {}).items():
            headers[str(k)] = str(v)
        return headers

    def reasoning_style(self) -> str | None:
        """OpenAI's rules, for OpenAI and every server spoken to in its protocol: reasoning as its config
        says, else as litellm's table or OpenAI's naming says (max_completion_tokens, reasoning_effort)."""
        return reasoning.style_of(self.config, "openai", self.price_model)

    def grammar_backed(self) -> bool:
        return served_with_grammar(self.config, self.model, self.local)

    def _params(self, asked: dict, request: dict | None = None) -> dict:
        """The request body's parameters: the provider's config, this call's request parameters over it
        (a test's options, a prompt function's config), then what the call asks (`parameters`)."""
        config = {**self.config, **request} if request else self.config
        params = {k: v for k, v in config.items() if k in PASSTHROUGH}
        if request and "max_tokens" in request and "max_completion_tokens" not in request:
            params.pop("max_completion_tokens", None)  # the call's own cap wins over the provider's
        params.update({k: v for k, v in asked.items() if k != "drop_params"})
        if "max_completion_tokens" in params:
            params.pop("max_tokens", None)
        return params

    def body(self, request: CallRequest) -> dict:
        """The JSON body of the request's POST (to /chat/completions, or /completions for a completion
        model): the config's parameters, the prompt's own over them, the request's over those, with what
        this endpoint refused earlier in the run dropped or changed (run/calling/caller.py learns it from the PARAM
        error below). A batch line's `body` is the same."""
        params = adapt(self._params(self.parameters(request), request.prompt.config), request.adaptations)
        body = {"model": self.model, **params}
        if self.kind == "completion":
            body["prompt"] = request.prompt.text
        else:
            body["messages"] = request.prompt.messages
        return body

    def url(self) -> str:
        base = (self.base_url() or "https://api.openai.com/v1").rstrip("/")
        return f"{base}/completions" if self.kind == "completion" else f"{base}/chat/completions"

    # -- batch mode (run/calling/batches.py): OpenAI's Batch API (providers/batch_openai.py)
    batch_api = "openai"

    def batch_body(self, request: CallRequest) -> dict:
        """A batch line's `body`: the direct call's body, by the same builder."""
        return self.body(request)

    def batch_client(self):
        """The client of OpenAI's Batch API at this provider's base URL (run/calling/batches.py)."""
        from factcli.providers.batch_openai import OpenAIBatches

        path = "/completions" if self.kind == "completion" else "/chat/completions"
        return OpenAIBatches(self.base_url() or "https://api.openai.com/v1", self._api_key(), "/v1" + path,
                             self._headers())

    def batch_reply(self, body: dict, sent: dict) -> ProviderResponse:
        """A batch line's reply (its `response.body`), read as a direct reply and priced at the batch price."""
        if not isinstance(body, dict) or not body.get("choices"):
            return ProviderResponse(error=f"malformed batch reply: {json.dumps(body)[:300]}")
        return self._response(body, sent.get("prompt", sent.get("messages")), batch=True)

    async def call(self, request: CallRequest) -> ProviderResponse:
        url = self.url()
        body = self.body(request)
        status, data, resp_headers, text = await _post(url, body, self._headers())
        if status < 400:
            if not isinstance(data, dict) or not data.get("choices"):
                raise ProviderCallError(f"malformed response from {url}: {text[:300]}", TRANSIENT)
            return self._response(data, body.get("prompt", body.get("messages")))
        if status == 400 and request.form != "plain" and names_response_format(text):
            # the caller's structured-output request: run/calling/caller.py picks a simpler form and remembers it
            raise ProviderCallError(f"HTTP 400: {_detail(data, text)}", FORMAT, 400)
        if status == 400:
            error = data.get("error") if isinstance(data, dict) else None
            refusal = refused_parameter(_detail(data, text), error.get("param") if isinstance(error, dict) else None,
                                        body)
            if refusal is not None:
                raise ProviderCallError(f"HTTP 400: {_detail(data, text)}", PARAM, 400, refusal=refusal)
        raise _classify_status(status, data, resp_headers, text)

    def _response(self, data: dict, sent, batch: bool = False) -> ProviderResponse:
        choice = data["choices"][0]
        if self.kind == "completion":
            output = choice.get("text")
        else:
            message = choice.get("message") or {}
            output = message.get("content")
            if message.get("tool_calls") and not output:
                output = message["tool_calls"]
        usage = data.get("usage")
        tokens = TokenUsage(num_requests=1)
        if isinstance(usage, dict):
            tokens.prompt = int(usage.get("prompt_tokens") or 0)
            tokens.completion = int(usage.get("completion_tokens") or 0)
            tokens.total = int(usage.get("total_tokens") or tokens.prompt + tokens.completion)
            details = usage.get("prompt_tokens_details") or {}
            tokens.cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
            details = usage.get("completion_tokens_details") or {}  # reasoning models: part of completion
            tokens.reasoning = int(details.get("reasoning_tokens") or 0) if isinstance(details, dict) else 0
        logprobs = None
        lp = choice.get("logprobs")
        if isinstance(lp, dict) and lp.get("content"):
            logprobs = [float(t.get("logprob", 0.0)) for t in lp["content"]]
        meta: dict = {}
        if not isinstance(usage, dict):
            counted = count_usage(sent, output, self.model)
            if counted is not None:
                tokens, meta["tokensCountedWith"] = counted
        out = ProviderResponse(output=output if output is not None else "", token_usage=tokens,
                               finish_reason=choice.get("finish_reason"), logprobs=logprobs, metadata=meta)
        # cached_tokens, among prompt_tokens, at the model's cache-read price; a batch line's at the batch price
        pricing.bill(self, out, batch=batch, known=isinstance(usage, dict) or "tokensCountedWith" in meta)
        return out


_sessions: dict[int, object] = {}


async def _post(url: str, body: dict, headers: dict):
    """One POST on the loop's shared session -> (status, parsed JSON or None, headers, text)."""
    import asyncio

    import aiohttp

    loop_id = id(asyncio.get_running_loop())
    session = _sessions.get(loop_id)
    if session is None or session.closed:
        # no connection cap here: the executor's workers already bound what is in flight
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                                        json_serialize=json.dumps)
        _sessions[loop_id] = session
    try:
        async with session.post(url, json=body, headers=headers) as resp:
            text = await resp.text()
            status, resp_headers = resp.status, dict(resp.headers)
    except aiohttp.ClientError as exc:  # refused, reset, dropped mid-response, bad URL
        raise ProviderCallError(f"connection error: {type(exc).__name__}: {exc}", TRANSIENT,
                                unreachable=isinstance(exc, aiohttp.ClientConnectorError)) from None
    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = None
        if status < 400:
            raise ProviderCallError(f"malformed response (not JSON): {text[:300]}", TRANSIENT) from None
    return status, data, resp_headers, text


async def aclose_all() -> None:
    """Close the session of the running loop (at the end of a run)."""
    import asyncio

    session = _sessions.pop(id(asyncio.get_running_loop()), None)
    if session is not None:
        await session.close()


def _detail(data, text: str) -> str:
    error = data.get("error") if isinstance(data, dict) else None
    detail = error.get("message") if isinstance(error, dict) else None
    return detail or text[:500] or "no body"


def _classify_status(status: int, data, headers: dict, text: str) -> ProviderCallError:
    message = f"HTTP {status}: {_detail(data, text)}"
    if is_context_exceeded(text) or is_context_exceeded(message):
        return ProviderCallError(message, CONTEXT, status)
    return http_error(message, status, headers)
