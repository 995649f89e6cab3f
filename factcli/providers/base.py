"""What a provider is: a Provider turns a request (providers/request.CallRequest: the rendered prompt
and what the call asks) into its own wire form and the reply into a ProviderResponse, and classifies its
own failures by raising ProviderCallError; factcli.run.calling.caller owns caching, timeouts and retries for
all of them. `register_provider` puts a class in the registry (factcli.providers.registry)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from factcli.providers.request import CallRequest, RenderedPrompt  # noqa: F401 (RenderedPrompt: imported from here)
from factcli.types import ProviderResponse, ProviderSpec

# kinds of failure, decided by the provider, acted on by factcli.run.calling.caller
RATE_LIMIT, TRANSIENT, AUTH, FATAL, ERROR = "rate_limit", "transient", "auth", "fatal", "error"
# The prompt plus the reply did not fit the model's context window: permanent whatever the HTTP status
# (llama.cpp answers 500), so tried once. Seen: OpenAI's 400 `context_length_exceeded`, llama.cpp's
# "Context size has been exceeded" / `exceed_context_size_error`, vLLM's "maximum context length".
CONTEXT = "context"
# The server refused the request's `response_format` (HTTP 400 naming it): run/calling/caller.py asks again with
# a simpler form (json_schema -> json_object -> none) and remembers the form for that endpoint.
FORMAT = "format"
# The call outlived its timeout: likely a long generation, so run/calling/caller.py retries it only once.
TIMEOUT = "timeout"
# The server refused one request parameter (HTTP 400 naming it: `max_tokens` on OpenAI's reasoning models,
# a `temperature` other than 1, `seed`, an effort level): the error's `refusal` says what to do instead,
# and run/calling/caller.py asks again at once and does so for that endpoint for the rest of the run.
PARAM = "param"
# Both patterns are compiled by `re` at the first error they read, not at import: every start would pay for them.
_NAMES_FORMAT = r"response_format|json[_ ]schema|json_object|structured output|guided_json|grammar"


def names_response_format(text: str | None) -> bool:
    """A 400's message that blames the requested output format (OpenAI's `param: response_format`,
    "json_schema is not supported", vLLM's guided decoding, a grammar error)."""
    return bool(text) and re.search(_NAMES_FORMAT, text, re.IGNORECASE) is not None and not is_context_exceeded(text)
_CONTEXT_EXCEEDED = (r"context_length_exceeded|context size has been exceeded|exceed_context_size_error|"
                     r"maximum context length|ContextWindowExceeded")


def is_context_exceeded(text: str | None) -> bool:
    return bool(text) and re.search(_CONTEXT_EXCEEDED, text, re.IGNORECASE) is not None


class ProviderCallError(Exception):
    def __init__(self, message: str, kind: str = ERROR, status: int | None = None,
                 retry_after: float | None = None, refusal: tuple | None = None, unreachable: bool = False):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after
        self.refusal = refusal  # PARAM: (parameter, "drop" | "rename" | "value", the new name or value)
        self.unreachable = unreachable  # no connection at all (refused, no such host): run/calling/breaker.py counts it


# Parameters a refusal may adapt; never the prompt, the model, or the structured-output form (FORMAT's)
_ADAPTABLE = ("max_tokens", "max_completion_tokens", "temperature", "seed", "top_p", "top_k", "reasoning_effort",
              "thinking", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs", "logit_bias", "stop")
_BARE = ("temperature", "seed", "thinking")  # named without quotes too; other short names only quoted
_NAMED = (r"(?:unsupported (?:parameter|value)|unrecognized request argument|unknown (?:parameter|field|name)"
          r"|not supported|does not support|is not allowed|may only be set|extra inputs are not permitted"
          r"|not permitted)")
_EFFORT_ORDER = ("none", "minimal", "low", "medium", "high", "xhigh")


def refused_parameter(message: str | None, param: str | None, sent: dict) -> tuple | None:
    """What a 400 refusing one of the request's parameters asks for: (name, "drop" | "rename" | "value",
    arg), or None when the 400 is about something else. Written from the vendors' error bodies: OpenAI's
    `{"param": "max_tokens", "code": "unsupported_parameter", "message": "Unsupported parameter:
    'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."}`, its
    "Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is
    supported.", "... 'reasoning_effort' does not support 'low' ... Supported values are: 'medium' and
    'high'.", Anthropic's "`temperature` may only be set to 1 when thinking is enabled"."""
    text = message or ""
    if not text or is_context_exceeded(text):
        return None
    names = [k for k in _ADAPTABLE if k in sent]
    if not names:
        return None
    name = param if param in names else None
    if name is None:
        if re.search(_NAMED, text, re.IGNORECASE) is None:
            return None
        for k in sorted(names, key=len, reverse=True):  # max_completion_tokens before max_tokens
            bare = rf"|\b{re.escape(k)}\b(?!\.)" if "_" in k or k in _BARE else ""
            if re.search(rf"[`'\"]{re.escape(k)}[`'\"]" + bare, text):
                name = k
                break
        if name is None:
            return None
    if name == "max_tokens" and "max_completion_tokens" in text:
        return name, "rename", "max_completion_tokens"
    if name == "max_completion_tokens" and re.search(r"\bmax_tokens\b", text.replace("max_completion_tokens", "")):
        return name, "rename", "max_tokens"
    supported = re.search(r"[Ss]upported values are:?\s*(.+)", text)
    if supported:
        values = re.findall(r"'([^']+)'", supported.group(1))
        if name == "reasoning_effort":
            values = sorted((v for v in values if v in _EFFORT_ORDER), key=_EFFORT_ORDER.index)
        if values:
            return name, "value", values[0]
    return name, "drop", None


def adapt(params: dict, adaptations: dict | None) -> dict:
    """`params` with what an endpoint refused earlier in the run dropped, renamed or changed."""
    if not adaptations:
        return params
    out = dict(params)
    for name, (action, arg) in adaptations.items():
        if name not in out:
            continue
        if action == "drop":
            out.pop(name)
        elif action == "rename":
            value = out.pop(name)
            out.setdefault(arg, value)
        else:
            out[name] = arg
    return out


def http_error(message: str, status: int, headers: Any) -> ProviderCallError:
    """What an HTTP error status means to run/calling/caller.py, for every provider that speaks HTTP itself
    (the OpenAI-compatible fast path, the search backends)."""
    if status == 429:
        return ProviderCallError(message, RATE_LIMIT, status, retry_after_seconds(headers))
    if status in (401, 403):
        return ProviderCallError(message, AUTH, status)
    if status >= 500 or status in (408, 409):
        return ProviderCallError(message, TRANSIENT, status, retry_after_seconds(headers))
    return ProviderCallError(message, ERROR, status)


def retry_after_seconds(headers: Any) -> float | None:
    """A `Retry-After` header (seconds or an HTTP date) from any header mapping, as seconds."""
    try:
        value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    except AttributeError:
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        import time
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


class Provider:
    """Base class. Subclasses set `cacheable` and implement `call`."""

    cacheable = True
    free = False  # costs nothing (echo): a budget need not know its price
    price_model: str | None = None  # the model's name in litellm's price table, when it has one
    local = False  # served on this machine or a private network: costs nothing unless priced by hand
    call_price: float | None = None  # USD per request, for services priced by the call (search APIs), not by token
    # answers inside this process without I/O and never raises ProviderCallError (echo): a call has
    # nothing to pace, time out or retry (run/calling/caller.py)
    in_process = False
    # runs the user's own code (a script provider): code that a stored run would run again
    user_code = False
    # a grader request's `response_format` reaches the model (an API): its reply is then held to the
    # step's schema (scoring/grading.py). User code (a script provider) gets no schema: its words are read
    takes_schema = True

    def __init__(self, spec: ProviderSpec, base_dir: Path | None = None):
        self.spec = spec
        self.id = spec.id
        self.config = spec.config
        self.base_dir = base_dir or Path.cwd()

    @property
    def label(self) -> str:
        return self.spec.label or self.spec.id

    def cache_identity(self) -> dict:
        """What, beside the messages, decides the output; secrets are left out by calls.cache_key."""
        return {"id": self.id, "config": self.config}

    def endpoint(self) -> str:
        """The server and model a call reaches, for what is remembered per endpoint during a run (the
        form of structured output it accepts)."""
        return self.id

    def server_url(self) -> str | None:
        """The URL of the server its calls go to when that is a local or configured one (an apiBaseUrl, a
        base URL from the environment, Ollama's default): the preflight connects to it before any call
        (run/planning/preflight.reach). None: nothing to connect to (in-process, or a vendor's own API)."""
        return None

    def preflight(self) -> list[str]:
        """What would make this provider's first call fail, found without making it (a missing
        credential, an unknown vendor, a script that does not import): one line per problem."""
        return []

    def reasoning_style(self) -> str | None:
        """The family whose parameters carry this model's reasoning ("openai", "anthropic", "gemini"), or
        None when it does not reason or takes no parameters (user code, echo, search, embeddings)."""
        return None

    def grammar_backed(self) -> bool:
        """Whether its server turns a reply's JSON schema into a grammar (providers/dialects.py), so a
        grader step sends it the schema with lengths that fit the cap."""
        return False

    def reasoning_parameters(self, request: CallRequest) -> dict:
        """A reasoning request's parameters in this provider's family's terms (providers/reasoning.py)."""
        from factcli.providers import reasoning

        return reasoning.parameters(request.reasoning.style, self.config or {}, request.reasoning,
                                    request.temperature, request.seed)

    def parameters(self, request: CallRequest) -> dict:
        """What the request asks beyond its prompt, in OpenAI's parameter names (litellm takes the same):
        the reply cap, factcli's sampling, the reasoning parameters of the provider's family, the
        `response_format` of the form asked, and `drop_params` for a grader (its parameters are factcli's
        choice: litellm drops those a model does not take). Laid over the provider's config by the wire
        body; hashed into the response cache key (run/calling/caller.py), as the untyped overrides were."""
        out: dict = {}
        if request.reasoning is not None:
            out.update(self.reasoning_parameters(request))
        else:
            if request.temperature is not None:
                out["temperature"] = request.temperature
            if request.seed is not None:
                out["seed"] = request.seed
        if request.purpose == "grader":
            out["drop_params"] = True
        if request.reasoning is None and request.max_tokens is not None:
            out["max_tokens"] = request.max_tokens
        response_format = request.response_format()
        if response_format is not None:
            out["response_format"] = response_format
        return out

    async def call(self, request: CallRequest) -> ProviderResponse:
        raise NotImplementedError


def response_from_dict(data: Any) -> ProviderResponse:
    """promptfoo's ProviderResponse shape (from python/exec providers) -> ProviderResponse."""
    from factcli.types import TokenUsage, cache_write_of

    if not isinstance(data, dict):
        return ProviderResponse(output=data)
    usage = data.get("tokenUsage") or {}
    prompt, completion = int(usage.get("prompt") or 0), int(usage.get("completion") or 0)
    details = usage.get("completionDetails") or {}
    tu = TokenUsage(
        prompt=prompt, completion=completion, total=int(usage.get("total") or (prompt + completion)),
        cached=int(usage.get("cached") or 0), num_requests=int(usage.get("numRequests") or 1),
        reasoning=int(details.get("reasoning") or 0) if isinstance(details, dict) else 0,
        cache_write=cache_write_of(usage),
    )
    cost = data.get("cost")
    return ProviderResponse(
        output=data.get("output"), error=data.get("error") or None, token_usage=tu,
        cost=float(cost) if isinstance(cost, (int, float)) else None,
        finish_reason=data.get("finishReason"), logprobs=data.get("logProbs"),
        metadata=data.get("metadata") or {}, cached=data.get("cached") is True,
    )


FACTORIES: list[tuple[Callable[[str], bool], type]] = []


def register_provider(match: str | Callable[[str], bool]):
    """Register a Provider subclass for ids equal to `match`, starting with `match:`, or matched by a callable."""

    def test(pid: str) -> bool:
        if callable(match):
            return match(pid)
        return pid == match or pid.startswith(match + ":")

    def deco(cls):
        FACTORIES.append((test, cls))
        return cls

    return deco


def key_problem(config: dict, default_vars: tuple[str, ...]) -> str | None:
    """The missing credential of a provider, as one line, or None: its config's `apiKey`, else the
    variable its `apiKeyEnvar` names, else any of `default_vars`."""
    import os

    key = config.get("apiKey")
    if key is not None and not isinstance(key, str):  # a list or a mapping would be sent as its repr
        return f"apiKey must be one string, got {type(key).__name__}"
    if key:
        return None
    named = config.get("apiKeyEnvar")
    if named:
        return None if os.environ.get(str(named)) else f"apiKeyEnvar names {named}, which is not set"
    if any(os.environ.get(v) for v in default_vars):
        return None
    return f"no API key: set {' or '.join(default_vars)} (or apiKey / apiKeyEnvar in its config)"


def has_userinfo(url: str) -> bool:
    """Whether a URL carries a user name or password before its host (`http://user:pw@host`): the HTTP
    client refuses it beside the Authorization header factcli sends, and it would send a password to
    whoever the URL names; a provider's endpoint never has one (config/providers, the preflight)."""
    return isinstance(url, str) and re.match(r"(?i)\s*[a-z][a-z0-9+.-]*://[^/?#\s]*@", url) is not None
