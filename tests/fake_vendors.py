"""Stand-ins for the judges people use, on 127.0.0.1, each written from its vendor's API documentation and
reached by the real clients (factcli's own OpenAI path, or litellm given `api_base`). One server answers
every vendor's path:

  OpenAI reasoning models   POST /v1/chat/completions (a model named o1/o3/o4/gpt-5, not gpt-5-chat)
      `max_tokens` refused: 400 {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported
      with this model. Use 'max_completion_tokens' instead.", "param": "max_tokens", "code":
      "unsupported_parameter"}}; a `temperature` other than 1 refused ("Unsupported value: 'temperature'
      does not support 0 with this model. Only the default (1) value is supported."); a
      `reasoning_effort` the model does not take refused naming the ones it does. Hidden reasoning
      tokens (REASONING by effort: 700 at the default `medium`, 4x at `high`) are drawn from
      `max_completion_tokens` first: an allowance they exhaust is answered with empty content, one they
      leave too little of with cut content, both `finish_reason: "length"`. usage.completion_tokens
      counts them, usage.completion_tokens_details.reasoning_tokens says how many.
      Other models: as an OpenAI-compatible local server with a grammar (llama.cpp's llama-server):
      `response_format: json_schema` constrains the reply, a string's `maxLength` ends it.
  Anthropic Messages        POST /v1/messages. `max_tokens` required; `thinking: {type: enabled,
      budget_tokens}` needs budget_tokens >= 1024 and below max_tokens, and refuses a temperature other
      than 1 and top_k; thinking is spent first (min(budget, THINKING)) and the text after it, both out
      of max_tokens (stop_reason "max_tokens" when it runs out); `output_format: {type: json_schema}`
      constrains the text; usage.output_tokens counts thinking and text. Prompt caching as Anthropic's
      (tests/prompt_caches.AnthropicCache): `cache_control` blocks, input_tokens after the last breakpoint,
      cache_creation_input_tokens and cache_read_input_tokens. `cache_tokens = (written, read)`, when set,
      reports that many of the prompt's tokens (the first ones; at most all of them) as written to and
      read from the cache instead, whatever was marked (a pricing test's fixed figures).
  Gemini generateContent    POST /v1beta/models/{model}:generateContent (also without /v1beta).
      generationConfig (camelCase or snake_case): maxOutputTokens covers the thoughts and the text;
      thinkingConfig.thinkingBudget (0-24576 for flash models, 128-32768 for pro, -1 dynamic; a 2.5
      model thinks THINKING tokens by default); responseJsonSchema takes JSON Schema; responseSchema
      takes only Google's OpenAPI subset (no additionalProperties, $schema, or type "null": 400
      'Invalid JSON payload received. Unknown name "additionalProperties" at
      'generation_config.response_schema...': Cannot find field.'); finishReason MAX_TOKENS with no
      text parts when the thoughts used everything; usageMetadata.thoughtsTokenCount.
  Ollama                    POST /api/chat: `format` (a JSON schema, or "json") constrains the reply
      as its grammar does (a string's maxLength ends it); options.num_predict caps it (done_reason
      "length"); prompt_eval_count and eval_count are the usage.

A token is a whitespace-separated word. The judge (`judge(body, schema) -> value`) decides what a
constrained reply says: by default the simplest value the schema allows (`instance`); `rambling()` is a
small local model that writes on and on inside every string, which only a maxLength stops.
Every request is recorded in `requests` (path, json); `refusals` counts the 400s by (model, parameter).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from typing import Any, Callable

from aiohttp import web
from local_server import LocalServer
from prompt_caches import AnthropicCache

SENTENCE = "Paris is big."
REASONING = {"minimal": 175, "low": 350, "medium": 700, "high": 2800}  # 700 at the default effort, 4x at high
THINKING = 700  # Claude's and Gemini's thinking when the budget leaves room
_REASONS = re.compile(r"^(?:o[134](?:-|$)|gpt-5(?!-chat))")


def instance(schema: dict, text: str = SENTENCE) -> Any:
    """The simplest value a JSON schema allows: every string `text` (cut to its maxLength), every choice
    the first, every list one item long, every number its minimum or 1."""
    if "anyOf" in schema:
        return instance(schema["anyOf"][0], text)
    if "enum" in schema:
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "string":
        return text[:schema["maxLength"]] if "maxLength" in schema else text
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "array":
        return [instance(schema["items"], text)] * max(1, schema.get("minItems", 0))
    return {k: instance(v, text) for k, v in (schema.get("properties") or {}).items()}


RAMBLES = ("reason", "reasoning", "rationale", "evidence")


def rambling(body: dict, schema: dict) -> Any:
    """A 270M model's verdict: the right shape, every reason written on and on and every list of texts
    listed on and on, until something (a grammar's maxLength or maxItems, the cap) stops it."""
    on = SENTENCE + " " + " ".join(["and", "so", "it", "goes", "on"] * 500)

    def value(s: dict, name: str = "") -> Any:
        if "anyOf" in s:
            return value(s["anyOf"][0], name)
        kind = str(s.get("type", "object")).lower()
        if kind == "string" and "enum" not in s and name in RAMBLES:
            return on[:s["maxLength"]] if "maxLength" in s else on
        if kind == "array" and str(s["items"].get("type")).lower() == "string":
            return [value(s["items"])] * s.get("maxItems", 40)
        if kind == "object":
            return {k: value(v, k) for k, v in (s.get("properties") or {}).items()}
        return instance(s)

    return value(schema)


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def _cut(text: str, n: int) -> str:
    return " ".join(text.split()[:max(0, n)])


def _system_text(system) -> str:
    """Anthropic's `system`: a string, or a list of text blocks (how a cache_control mark is sent)."""
    if isinstance(system, list):
        return " ".join(str(p.get("text", "")) for p in system if isinstance(p, dict))
    return str(system or "")


def _prompt_words(messages) -> int:
    total = 0
    for m in messages or []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        total += _words(content if isinstance(content, str) else "")
    return total


class FakeVendors(LocalServer):
    name = "FakeVendors"

    def __init__(self, judge: Callable[[dict, dict], Any] | None = None):
        self.judge = judge or (lambda body, schema: instance(schema))
        self.requests: list[dict] = []
        self.refusals: dict[tuple[str, str], int] = {}
        self.reasoning = dict(REASONING)
        self.efforts: dict[str, tuple[str, ...]] = {}  # model -> the reasoning_effort values it takes
        self.reasoning_models: set[str] = set()  # reasoning models beyond OpenAI's names (a custom endpoint)
        self.thinking = THINKING
        self.cache_tokens = (0, 0)  # Anthropic's (cache_creation_input_tokens, cache_read_input_tokens)
        self._lock = threading.Lock()
        # Anthropic's prompt caching (tests/prompt_caches.py); `cache_latency`: seconds between a request and
        # its reply, during which the entries it writes are not there yet
        self.anthropic_cache = AnthropicCache()
        self.cache_latency = 0.0

    # ------------------------------------------------------------ helpers

    def by_path(self, part: str) -> list[dict]:
        return [r["json"] for r in self.requests if part in r["path"]]

    def _refuse(self, model: str, param: str, body: dict) -> web.Response:
        with self._lock:
            self.refusals[(model, param)] = self.refusals.get((model, param), 0) + 1
        return web.json_response(body, status=400)

    def _reply_text(self, body: dict, schema: dict | None) -> str:
        if schema is None:
            return "A " + SENTENCE
        return json.dumps(self.judge(body, schema))

    async def _read(self, request: web.Request) -> dict:
        body = await request.json()
        with self._lock:
            self.requests.append({"path": request.path, "json": body})
        return body

    # ------------------------------------------------------------ OpenAI

    async def openai_chat(self, request):
        body = await self._read(request)
        model = str(body.get("model", ""))
        rf = body.get("response_format") or {}
        schema = (rf.get("json_schema") or {}).get("schema") if rf.get("type") == "json_schema" else None
        if not (_REASONS.match(model) or model in self.reasoning_models):
            return self._grammar_chat(body, model, schema)
        if "max_tokens" in body:
            return self._refuse(model, "max_tokens", {"error": {
                "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                           "'max_completion_tokens' instead.", "type": "invalid_request_error", "param": "max_tokens",
                "code": "unsupported_parameter"}})
        if "temperature" in body and body["temperature"] != 1:
            return self._refuse(model, "temperature", {"error": {
                "message": f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. "
                           "Only the default (1) value is supported.", "type": "invalid_request_error",
                "param": "temperature", "code": "unsupported_value"}})
        effort = body.get("reasoning_effort", "medium")
        takes = self.efforts.get(model, tuple(self.reasoning))
        if effort not in takes:
            listed = " and ".join(f"'{e}'" for e in takes)
            return self._refuse(model, "reasoning_effort", {"error": {
                "message": f"Unsupported value: 'reasoning_effort' does not support '{effort}' with this model. "
                           f"Supported values are: {listed}.", "type": "invalid_request_error",
                "param": "reasoning_effort", "code": "unsupported_value"}})
        allowance = body.get("max_completion_tokens")
        hidden = self.reasoning[effort]
        text = self._reply_text(body, schema)
        finish = "stop"
        if allowance is not None and hidden + _words(text) > allowance:
            hidden = min(hidden, allowance)
            text, finish = _cut(text, allowance - hidden), "length"
        prompt = _prompt_words(body.get("messages"))
        return web.json_response({
            "id": "chatcmpl-reasoning", "object": "chat.completion", "created": 1_700_000_000, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                         "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": hidden + _words(text),
                      "total_tokens": prompt + hidden + _words(text),
                      "prompt_tokens_details": {"cached_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": hidden, "accepted_prediction_tokens": 0,
                                                    "rejected_prediction_tokens": 0}}})

    def _grammar_chat(self, body: dict, model: str, schema: dict | None) -> web.Response:
        """llama.cpp's llama-server: the schema becomes a grammar; max_tokens (or n_predict) cuts."""
        text = self._reply_text(body, schema)
        cap = body.get("max_tokens", body.get("max_completion_tokens"))
        finish = "stop"
        if cap is not None and _words(text) > cap:
            text, finish = _cut(text, cap), "length"
        prompt = _prompt_words(body.get("messages"))
        return web.json_response({
            "id": "chatcmpl-grammar", "object": "chat.completion", "created": 1_700_000_000, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": _words(text),
                      "total_tokens": prompt + _words(text)}})

    # ------------------------------------------------------------ Anthropic

    async def anthropic_messages(self, request):
        body = await self._read(request)
        model = str(body.get("model", ""))

        def invalid(message: str, param: str) -> web.Response:
            return self._refuse(model, param, {"type": "error", "error": {"type": "invalid_request_error",
                                                                          "message": message}})

        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int):
            return invalid("max_tokens: Field required", "max_tokens")
        thinking = body.get("thinking") or {}
        budget = 0
        if thinking.get("type") == "enabled":
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or budget < 1024:
                return invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
                               "thinking")
            if budget >= max_tokens:
                return invalid("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                               "documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
                               "#max-tokens-and-context-window-size", "max_tokens")
            if "temperature" in body and body["temperature"] != 1:
                return invalid("`temperature` may only be set to 1 when thinking is enabled. Please consult our "
                               "documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
                               "#feature-compatibility", "temperature")
            if "top_k" in body:
                return invalid("`top_k` is not supported when thinking is enabled.", "top_k")
        cached = self.anthropic_cache.usage(body)
        if isinstance(cached, str):
            return invalid(cached, "cache_control")
        out = body.get("output_format") or {}
        schema = out.get("schema") if out.get("type") == "json_schema" else None
        spent = min(budget, self.thinking, max_tokens)
        text = self._reply_text(body, schema)
        stop = "end_turn"
        if spent + _words(text) > max_tokens:
            text, stop = _cut(text, max_tokens - spent), "max_tokens"
        content = []
        if budget:
            content.append({"type": "thinking", "thinking": " ".join(["weighing"] * spent), "signature": "sig-fake"})
        if text:
            content.append({"type": "text", "text": text})
        usage = await self._cache_usage(*cached)
        return web.json_response({
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop, "stop_sequence": None,
            "usage": {**(self._anthropic_input(_prompt_words(body.get("messages"))
                                               + _words(_system_text(body.get("system"))))
                         if any(self.cache_tokens) else usage),
                      "output_tokens": spent + _words(text)}})

    async def _cache_usage(self, usage: dict, written: list) -> dict:
        """The request's input usage once its reply goes: the cache entries it wrote are there from now on."""
        if self.cache_latency:
            await asyncio.sleep(self.cache_latency)
        self.anthropic_cache.keep(usage, written)
        return usage

    def _anthropic_input(self, prompt: int) -> dict:
        written = min(self.cache_tokens[0], prompt)
        read = min(self.cache_tokens[1], prompt - written)
        return {"input_tokens": prompt - written - read, "cache_creation_input_tokens": written,
                "cache_read_input_tokens": read}

    # ------------------------------------------------------------ Gemini

    _SUBSET = {"type", "format", "description", "nullable", "enum", "maxItems", "minItems", "properties", "required",
               "propertyOrdering", "items", "anyOf", "minimum", "maximum", "minLength", "maxLength", "pattern",
               "example", "title", "minProperties", "maxProperties", "default"}

    def _subset_problem(self, schema: Any, where: str) -> str | None:
        """The first thing Google's OpenAPI-subset `responseSchema` does not take."""
        if not isinstance(schema, dict):
            return None
        for key, value in schema.items():
            if key not in self._SUBSET:
                return f'Invalid JSON payload received. Unknown name "{key}" at \'{where}\': Cannot find field.'
            if key == "type" and str(value).lower() == "null":
                return (f"Invalid value at '{where}.type' (type.googleapis.com/google.ai.generativelanguage.v1beta"
                        f".Type), \"null\"")
        for name, sub in (schema.get("properties") or {}).items():
            found = self._subset_problem(sub, f"{where}.properties[{name}].value")
            if found:
                return found
        for i, sub in enumerate(schema.get("anyOf") or []):
            found = self._subset_problem(sub, f"{where}.any_of[{i}]")
            if found:
                return found
        return self._subset_problem(schema.get("items"), f"{where}.items") if "items" in schema else None

    @staticmethod
    def _shown_schema(body: dict) -> dict:
        """The schema a prompt shows last, after "Use this JSON schema:" (a Python literal in a ```json fence,
        as litellm writes it), else any object."""
        import ast

        shown = {"type": "object"}
        for content in body.get("contents") or []:
            for part in content.get("parts") or []:
                found = re.search(r"Use this JSON schema:\s*```json\s*(\{.*\})\s*```", str(part.get("text", "")), re.S)
                if found:
                    try:
                        shown = ast.literal_eval(found.group(1))
                    except (ValueError, SyntaxError):
                        pass
        return shown

    async def gemini_generate(self, request):
        body = await self._read(request)
        model = request.match_info["model"]
        config = body.get("generationConfig") or body.get("generation_config") or {}

        def get(*names):
            return next((config[n] for n in names if n in config), None)

        def invalid(message: str, param: str) -> web.Response:
            return self._refuse(model, param, {"error": {"code": 400, "message": message,
                                                         "status": "INVALID_ARGUMENT"}})

        subset = get("responseSchema", "response_schema")
        if subset is not None:
            problem = self._subset_problem(subset, "generation_config.response_schema")
            if problem:
                return invalid(problem, "response_schema")
        schema = get("responseJsonSchema", "response_json_schema") or subset
        if schema is None and get("responseMimeType", "response_mime_type") == "application/json":
            schema = self._shown_schema(body)  # JSON asked for, its schema only in the prompt (litellm, Gemini 1.5)
        thinking = get("thinkingConfig", "thinking_config") or {}
        budget = thinking.get("thinkingBudget", thinking.get("thinking_budget", -1))
        thinks = "2.5" in model or "gemini-3" in model
        low = 128 if "pro" in model else 0
        high = 32768 if "pro" in model else 24576
        if thinks and budget != -1 and not low <= budget <= high:
            return invalid(f"The thinking budget {budget} is invalid. Please choose a value between {low} and {high}.",
                           "thinking_budget")
        limit = get("maxOutputTokens", "max_output_tokens")
        spent = 0 if not thinks or budget == 0 else (self.thinking if budget == -1 else min(budget, self.thinking))
        text = self._reply_text(body, schema)
        finish = "STOP"
        if limit is not None and spent + _words(text) > limit:
            spent = min(spent, limit)
            text, finish = _cut(text, limit - spent), "MAX_TOKENS"
        prompt = sum(_words(p.get("text", "")) for c in body.get("contents") or [] for p in c.get("parts") or [])
        content: dict = {"role": "model"}
        if text:
            content["parts"] = [{"text": text}]
        usage = {"promptTokenCount": prompt, "candidatesTokenCount": _words(text),
                 "totalTokenCount": prompt + spent + _words(text)}
        if spent:
            usage["thoughtsTokenCount"] = spent
        return web.json_response({"candidates": [{"content": content, "finishReason": finish, "index": 0}],
                                  "usageMetadata": usage, "modelVersion": model})

    # ------------------------------------------------------------ Ollama

    async def ollama_chat(self, request):
        body = await self._read(request)
        fmt = body.get("format")
        schema = fmt if isinstance(fmt, dict) else ({"type": "object"} if fmt == "json" else None)
        text = self._reply_text(body, schema)
        cap = (body.get("options") or {}).get("num_predict")
        reason = "stop"
        if cap is not None and cap >= 0 and _words(text) > cap:
            text, reason = _cut(text, cap), "length"
        return web.json_response({
            "model": body.get("model"), "created_at": "2026-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": text}, "done": True, "done_reason": reason,
            "prompt_eval_count": _prompt_words(body.get("messages")), "eval_count": _words(text)})

    # ------------------------------------------------------------ lifecycle

    def routes(self, app: web.Application) -> None:
        for prefix in ("/v1", ""):
            app.router.add_post(prefix + "/chat/completions", self.openai_chat)
        app.router.add_post("/v1/messages", self.anthropic_messages)
        for prefix in ("/v1beta", ""):
            app.router.add_post(prefix + "/models/{model}:generateContent", self.gemini_generate)
        app.router.add_post("/api/chat", self.ollama_chat)
