"""Everything that is not echo/python/exec goes through litellm, imported only when a call is made.

promptfoo ids (`openai:chat:gpt-5`, `anthropic:messages:…`, `ollama:chat:…`) map onto litellm ids,
and promptfoo's provider config keys onto litellm's arguments. Retries are ours (num_retries=0).
What a call asks (providers/request.CallRequest) becomes litellm's arguments in
`LiteLLMProvider.kwargs(request)`, the one translation a direct call and a batch line share; the
model's vendor decides its reasoning parameters (`reasoning_family`).
"""

from __future__ import annotations

import os
import re

from factcli.activity import activity
from factcli.errors import ConfigError
from factcli.providers import pricing, prompt_cache, reasoning
from factcli.providers.base import (
    AUTH,
    CONTEXT,
    ERROR,
    FORMAT,
    PARAM,
    RATE_LIMIT,
    TIMEOUT,
    TRANSIENT,
    Provider,
    ProviderCallError,
    adapt,
    is_context_exceeded,
    key_problem,
    names_response_format,
    refused_parameter,
    retry_after_seconds,
)
from factcli.providers.dialects import GRAMMAR_IDS, served_with_grammar
from factcli.providers.request import CallRequest
from factcli.providers.tokens import counted_usage as count_usage
from factcli.types import ProviderResponse, TokenUsage

VENDORS = {
    "openai": "openai", "anthropic": "anthropic", "azure": "azure", "azureopenai": "azure",
    "google": "gemini", "gemini": "gemini", "vertex": "vertex_ai", "bedrock": "bedrock",
    "mistral": "mistral", "groq": "groq", "openrouter": "openrouter", "deepseek": "deepseek",
    "xai": "xai", "togetherai": "together_ai", "together": "together_ai", "perplexity": "perplexity",
    "cohere": "cohere", "huggingface": "huggingface", "fireworks": "fireworks_ai",
    "cerebras": "cerebras", "vllm": "hosted_vllm", "ollama": "ollama",
}
KINDS = {"chat", "messages", "completion", "responses"}
# promptfoo config keys passed to litellm under the same name
PASSTHROUGH = {
    "temperature", "max_tokens", "max_completion_tokens", "top_p", "seed", "response_format", "stop",
    "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs", "reasoning_effort", "tools",
    "tool_choice", "n", "user", "logit_bias", "top_k", "thinking",
}
RENAMED = {"apiBaseUrl": "api_base", "apiVersion": "api_version", "headers": "extra_headers",
           "organization": "organization", "timeout": "timeout", "base_model": "base_model"}
SECRET_KEYS = {"apiKey", "apiKeyEnvar"}


def to_litellm_model(pid: str) -> str:
    if pid.startswith("litellm:"):
        return pid[len("litellm:"):]
    if ":" not in pid:
        return pid
    vendor, rest = pid.split(":", 1)
    kind = None
    first, _, remainder = rest.partition(":")
    if first in KINDS and remainder:
        kind, rest = first, remainder
    if vendor == "openai" and kind == "completion":
        return f"text-completion-openai/{rest}"
    if vendor == "ollama":
        return f"ollama_chat/{rest}" if kind == "chat" else f"ollama/{rest}"
    return f"{VENDORS.get(vendor, vendor)}/{rest}"


def unknown_vendor(pid: str, model: str, litellm) -> str:
    """`unknown provider 'opnai' in 'opnai:gpt-5-mini' (did you mean openai:gpt-5-mini?)`."""
    import difflib

    vendor, sep, rest = pid.partition(":") if ":" in pid else model.partition("/")
    known = sorted(set(VENDORS) | {getattr(p, "value", str(p)) for p in litellm.provider_list})
    close = difflib.get_close_matches(vendor, known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}{sep}{rest}?)" if close else " (see https://docs.litellm.ai/docs/providers)"
    return f"unknown provider '{vendor}' in '{pid}'{hint}"


# the kinds of other providers an id may name after its vendor (openai:embedding:…, openai:image:…)
OTHER_KINDS = {"embedding", "embeddings", "image", "moderation", "assistant", "realtime"}
_VENDOR_NAMES = {"openai": "OpenAI", "anthropic": "Anthropic", "azure": "Azure", "azureopenai": "Azure OpenAI",
                 "ollama": "Ollama"}


def kind_problem(pid: str) -> str | None:
    """`openai:chatt:gpt-4o-mini`: a warning with a did-you-mean, as promptfoo warns `Unknown OpenAI model
    type: chatt` (it then sends the model `chatt`; factcli sends `chatt:gpt-4o-mini`). For openai:
    any middle part that is no kind (a fine-tune's `ft:` excepted); for the other vendors factcli
    maps, a near miss of a kind (their model names may hold colons: `ollama:llama3:8b`)."""
    import difflib

    vendor, _, rest = pid.partition(":")
    first, sep, model = rest.partition(":")
    if vendor not in VENDORS or not sep or not model or first in KINDS or first in OTHER_KINDS:
        return None
    close = difflib.get_close_matches(first, sorted(KINDS), n=1, cutoff=0.6)
    if vendor != "openai" and (not close or first == "ft"):
        return None
    if vendor == "openai" and first == "ft":
        return None
    name = _VENDOR_NAMES.get(vendor, vendor)
    hint = (f" (did you mean {vendor}:{close[0]}:{model}?)" if close
            else f" (use {vendor}:chat:<model>, {vendor}:completion:<model> or {vendor}:responses:<model>)")
    return f"unknown {name} model type '{first}'{hint}; it would be sent as the model '{rest}'"


def validate_id(pid: str, file: str, where: str) -> None:
    if any(ch.isspace() for ch in pid):
        raise ConfigError(f"provider id '{pid}' contains spaces", file, where)
    if pid.endswith(":") or "::" in pid:
        raise ConfigError(f"provider id '{pid}' is missing its model name (e.g. openai:gpt-5-mini)", file, where)


_litellm = None


def litellm_module():
    """Import litellm on first use. It is slow to import, so nothing else in factcli imports it."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never download the price table
        os.environ.setdefault("LITELLM_TELEMETRY", "False")
        with activity("Loading litellm (first use, a few seconds)"):
            import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        _litellm = litellm
    return _litellm


class LiteLLMProvider(Provider):
    def __init__(self, spec, base_dir=None):
        super().__init__(spec, base_dir)
        self.model = to_litellm_model(spec.id)
        self.price_model = self.model
        if self.model.startswith("azure/") and self.config.get("base_model"):
            # a deployment is named by its owner; litellm's `base_model` says which model it runs
            self.price_model = "azure/" + str(self.config["base_model"]).removeprefix("azure/")
        self.local = self.model.startswith(("ollama/", "ollama_chat/")) or pricing.is_local_url(
            self.call_kwargs(with_secrets=False).get("api_base"))

    def preflight(self) -> list[str]:
        litellm = litellm_module()
        kwargs = self.call_kwargs(with_secrets=False)
        try:
            litellm.get_llm_provider(self.model, api_base=kwargs.get("api_base"))
        except Exception:  # litellm's BadRequestError: it knows no provider for this id
            return [unknown_vendor(self.id, self.model, litellm)]
        if kwargs.get("api_base"):
            return []  # a server of the user's own: it may need no key
        missing = litellm.validate_environment(self.model).get("missing_keys") or []
        # only API keys: cloud credentials (AWS, Vertex) may come from profiles or metadata servers,
        # and Ollama's base defaults to localhost
        keys = tuple(k for k in missing if k.endswith(("_API_KEY", "_TOKEN")))
        problem = key_problem(self.config, keys) if keys else None
        return [problem] if problem else []

    def cache_identity(self) -> dict:
        return {"id": self.id, "model": self.model, "config": self.config,
                "api_base": self.call_kwargs(with_secrets=False).get("api_base")}

    def endpoint(self) -> str:
        return f"{self.call_kwargs(with_secrets=False).get('api_base') or ''} {self.model}"

    def server_url(self) -> str | None:
        base = self.call_kwargs(with_secrets=False).get("api_base")
        if not base and self.model.startswith(("ollama/", "ollama_chat/")):
            return "http://localhost:11434"  # litellm's default for Ollama
        return base or None

    def call_kwargs(self, with_secrets: bool = True, request: dict | None = None) -> dict:
        """litellm's arguments: the provider's config with this call's request parameters over it (a
        test's options, a prompt function's config; body parameters only, never the endpoint or key)."""
        cfg = self.config
        kwargs: dict = {}
        if request:
            for key, value in request.items():
                if key in PASSTHROUGH:
                    kwargs[key] = value
        for key, value in cfg.items():
            if key in PASSTHROUGH:
                kwargs.setdefault(key, value)
            elif key in RENAMED:
                kwargs[RENAMED[key]] = value
        if "api_base" not in kwargs:
            if self.model.startswith(("openai/", "text-completion-openai/")):
                base = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
                if base:
                    kwargs["api_base"] = base
            elif self.model.startswith(("ollama/", "ollama_chat/")) and os.environ.get("OLLAMA_BASE_URL"):
                kwargs["api_base"] = os.environ["OLLAMA_BASE_URL"]
        if with_secrets:
            key = cfg.get("apiKey")
            if not key and cfg.get("apiKeyEnvar"):
                key = os.environ.get(str(cfg["apiKeyEnvar"]))
            if not key and kwargs.get("api_base") and self.model.startswith(("openai/", "text-completion-openai/")):
                # local OpenAI-compatible servers (vLLM, llama.cpp) often need no key, but the client insists on one
                key = os.environ.get("OPENAI_API_KEY") or "no-key"
            if key:
                kwargs["api_key"] = key
        return kwargs

    def reasoning_family(self) -> str:
        """How its model takes reasoning parameters, by the model's vendor: "anthropic" (thinking.budget_tokens
        within max_tokens), "gemini" (litellm's thinking -> thinkingConfig.thinkingBudget within
        maxOutputTokens) or "openai" (max_completion_tokens and reasoning_effort: OpenAI, and any server
        spoken to in OpenAI's protocol)."""
        model = self.model.lower()
        if model.startswith(("openai/", "hosted_vllm/", "text-completion-openai/", "azure/")):
            return "openai"
        if "claude" in model:
            return "anthropic"
        if model.startswith(("gemini/", "vertex_ai/")):
            return "gemini"
        return "openai"

    def reasoning_style(self) -> str | None:
        return reasoning.style_of(self.config, self.reasoning_family(), self.price_model)

    def grammar_backed(self) -> bool:
        if self.config.get("grammar") is None and self.model.startswith(GRAMMAR_IDS):
            return True
        return served_with_grammar(self.config, self.model, self.local)

    def kwargs(self, request: CallRequest) -> dict:
        """`litellm.acompletion`'s keyword arguments for the request (model, messages, the API base and
        key, the timeout, no retries of litellm's own): the config's, the prompt's own parameters over
        them, the request's over those, with what this endpoint refused earlier in the run dropped or
        changed (run/calling/caller.py learns it from the PARAM error in `call`). A batch line is made of the same."""
        kwargs = self.call_kwargs(request=request.prompt.config)
        kwargs.update(self.parameters(request))
        kwargs = adapt(kwargs, request.adaptations)
        kwargs.setdefault("timeout", request.timeout_s or 300)
        messages = request.prompt.messages
        if "claude" in self.model and messages and all(m.get("role") == "system" for m in messages):
            # Anthropic takes no conversation of system messages alone (promptfoo's closedqa rubric is one):
            # the same text as the user's turn
            messages = [{"role": "user", "content": "\n\n".join(str(m.get("content") or "") for m in messages)}]
        messages = prompt_cache.marked(messages, self.model, request.cache_prefix, self.config)
        return {"model": self.model, "messages": messages, "num_retries": 0, **kwargs}

    # -- batch mode (run/calling/batches.py): Anthropic's Message Batches API (providers/batch_anthropic.py)

    @property
    def batch_api(self) -> str | None:
        return "anthropic" if self.model.startswith("anthropic/") else None

    def batch_body(self, request: CallRequest) -> dict:
        """The Messages API request of this call (a batch line's `params`): the call's own arguments
        (`kwargs`, the direct call's), put in Anthropic's form by litellm's own transformation."""
        from factcli.providers.batch_anthropic import params_of

        kwargs = self.kwargs(request)
        model, messages = kwargs.pop("model"), kwargs.pop("messages")
        return params_of(model.split("/", 1)[1], kwargs, messages)

    def batch_client(self):
        from factcli.providers.batch_anthropic import AnthropicBatches

        kwargs = self.call_kwargs()
        return AnthropicBatches(kwargs.get("api_base") or os.environ.get("ANTHROPIC_BASE_URL") or None,
                                kwargs.get("api_key") or os.environ.get("ANTHROPIC_API_KEY"))

    def batch_reply(self, body: dict, sent: dict) -> ProviderResponse:
        """A batch line's reply (an Anthropic message), read as litellm reads a direct one, at the batch price."""
        from factcli.providers.batch_anthropic import model_response

        try:
            resp = model_response(body, sent)
        except Exception as exc:  # noqa: BLE001 - a reply litellm cannot read is the call's error
            return ProviderResponse(error=f"malformed batch reply: {type(exc).__name__}: {exc}")
        out = to_response(resp, litellm_module(), sent.get("messages"), self.model)
        pricing.bill(self, out, batch=True, known=bool(out.token_usage.total or out.metadata.get("tokensCountedWith")))
        return out

    async def call(self, request: CallRequest) -> ProviderResponse:
        litellm = litellm_module()
        kwargs = self.kwargs(request)
        try:
            resp = await litellm.acompletion(**kwargs)
        except Exception as exc:  # classified for the retry owner
            err = classify(exc)
            if err.status == 400 and request.form != "plain" and names_response_format(str(err)):
                err.kind = FORMAT  # run/calling/caller.py asks again with a simpler form and remembers it
            elif err.kind == ERROR and err.status == 400:
                refusal = refused_parameter(str(err), None, kwargs)
                if refusal is not None:  # run/calling/caller.py asks again without it and remembers it
                    err.kind, err.refusal = PARAM, refusal
            raise err from None
        out = to_response(resp, litellm, request.prompt.messages, self.model)
        # factcli's one price rule (providers/pricing.py), not litellm's response_cost: the figure
        # --dry-run and --max-cost reckon with, with the config's prices and the cache's
        pricing.bill(self, out, known=bool(out.token_usage.total or out.metadata.get("tokensCountedWith")))
        return out


def _retry_after(exc) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) if response is not None else None
    return retry_after_seconds(headers or getattr(exc, "litellm_response_headers", None) or {})


def classify(exc: Exception) -> ProviderCallError:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    message = str(exc).strip() or name
    if len(message) > 1000:
        message = message[:1000] + "…"
    if name == "ContextWindowExceededError" or is_context_exceeded(message):
        return ProviderCallError(message, CONTEXT, status)
    if status == 429 or name == "RateLimitError":
        return ProviderCallError(message, RATE_LIMIT, 429, _retry_after(exc))
    if status in (401, 403) or name in ("AuthenticationError", "PermissionDeniedError"):
        return ProviderCallError(message, AUTH, status)
    if name == "Timeout":  # litellm's own timeout (the call's timeout_s): likely a long generation
        return ProviderCallError(message, TIMEOUT, status)
    if name in ("APIConnectionError", "ServiceUnavailableError", "InternalServerError") or (
        isinstance(status, int) and (status >= 500 or status in (408, 409))
    ):
        return ProviderCallError(message, TRANSIENT, status, _retry_after(exc), unreachable=name == "APIConnectionError"
                                 and _NO_CONNECTION.search(message) is not None)
    return ProviderCallError(message, ERROR, status)


# what litellm's APIConnectionError says when no connection was made at all (httpx's and aiohttp's words)
_NO_CONNECTION = re.compile(r"connection refused|connect call failed|name or service not known|"
                            r"nodename nor servname|getaddrinfo failed|cannot connect to host", re.IGNORECASE)


def to_response(resp, litellm, sent=None, model: str = "") -> ProviderResponse:
    choice = resp.choices[0]
    message = getattr(choice, "message", None)
    output = getattr(message, "content", None) if message is not None else getattr(choice, "text", None)
    tool_calls = getattr(message, "tool_calls", None) if message is not None else None
    if tool_calls and not output:
        output = [tc.model_dump() if hasattr(tc, "model_dump") else tc for tc in tool_calls]
    usage = getattr(resp, "usage", None)
    tu = TokenUsage(num_requests=1)
    if usage is not None:
        tu.prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        tu.completion = int(getattr(usage, "completion_tokens", 0) or 0)
        tu.total = int(getattr(usage, "total_tokens", 0) or (tu.prompt + tu.completion))
        # litellm puts OpenAI's reasoning tokens, Claude's thinking and Gemini's thoughts here, all of them
        # counted in completion_tokens (billed as output)
        details = getattr(usage, "completion_tokens_details", None)
        tu.reasoning = int(getattr(details, "reasoning_tokens", 0) or 0) if details is not None else 0
        tu.cached, tu.cache_write = _cache_tokens(usage)
    meta: dict = {}
    if not tu.total and sent is not None:  # no usage in the reply (litellm fills zeros)
        counted = count_usage(sent, output, model)
        if counted is not None:
            tu, meta["tokensCountedWith"] = counted
    logprobs = None
    lp = getattr(choice, "logprobs", None)
    content = getattr(lp, "content", None) if lp is not None else None
    if content:
        logprobs = [float(getattr(t, "logprob", 0.0)) for t in content]
    return ProviderResponse(output=output if output is not None else "", token_usage=tu,
                            finish_reason=getattr(choice, "finish_reason", None), logprobs=logprobs, metadata=meta)


def _int(value) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0


def _cache_tokens(usage) -> tuple[int, int]:
    """(cache reads, cache writes) of litellm's usage, both among its prompt_tokens: litellm adds
    Anthropic's cache_read_input_tokens and cache_creation_input_tokens to input_tokens, and keeps
    them in prompt_tokens_details (cached_tokens, cache_creation_tokens) and on the usage itself;
    OpenAI's, DeepSeek's and Gemini's cache reads are already in their prompt counts."""
    details = getattr(usage, "prompt_tokens_details", None)
    read = _int(getattr(details, "cached_tokens", None)) if details is not None else 0
    written = 0
    if details is not None:
        written = _int(getattr(details, "cache_creation_tokens", None)) or _int(
            getattr(details, "cache_write_tokens", None))
    read = read or _int(getattr(usage, "cache_read_input_tokens", None))
    written = written or _int(getattr(usage, "cache_creation_input_tokens", None))
    return read, written
