"""Function- and tool-call assertions, scored as promptfoo 0.121.20 scores them:
is-valid-openai-function-call (alias is-valid-function-call) and is-valid-openai-tools-call, which
check a call's name and JSON arguments against the function or tool definitions in the provider's
config (schemas through json_schema). promptfoo validates is-valid-openai-function-call only on
provider classes that implement a validator; which ones do is decided here from the provider id the
way promptfoo's classes decide it: OpenAI chat ids and the OpenAI-compatible groq:, deepseek:,
openrouter:, xai:, togetherai:, perplexity:, fireworks:, cerebras: check the call against
`functions`; google: and vertex: use promptfoo's Google validator (Gemini `functionCall` output
against the `functionDeclarations` in `tools`, schemas first reduced to Gemini's subset); everything
else (echo, scripts, anthropic:, azure:, bedrock:, ollama:, mistral:, litellm:, openai:responses:,
…) gets "Provider does not have functionality for checking function call.". A provider whose
config is missing crashes promptfoo's is-valid-openai-tools-call with a TypeError; factcli always has
a config, so that is "No tools configured in provider, but output contains tool calls". Tool-call
output is taken as the provider returned it: a JSON *string* of tool calls is not a tools response,
in promptfoo or here. Unparseable `arguments` fail with Python's JSON error text, not V8's.
`file://` tool or function definitions load from .json/.yaml files; promptfoo's
`file://tools.py:fn` / `file://tools.js:fn` generators are not supported (the row is an error).
"""

from __future__ import annotations

import re
from typing import Any

from factcli import templating
from factcli.assertions.js_semantics import js_json, js_truthy, jsify, json_parse
from factcli.assertions.json_schema import SchemaError, compile_schema
from factcli.scoring.registry import AssertionContext, AssertionError_, assertion
from factcli.types import GradingResult



# promptfoo providers whose class implements validateFunctionToolCall, and the config key it reads
_OPENAI_COMPATIBLE = ("groq:", "deepseek:", "openrouter:", "xai:", "togetherai:", "perplexity:", "fireworks:",
                      "cerebras:")
_OPENAI_NOT_CHAT = {"responses", "completion", "embedding", "embeddings", "image", "moderation", "realtime",
                    "assistant", "transcription", "tts", "speech", "video", "chatkit", "agents", "codex",
                    "codex-sdk", "codex-app-server", "codex-desktop"}


def _function_schema_key(provider: Any) -> str | None:
    """Decided by the provider id as promptfoo's provider classes decide it (echo, scripts,
    anthropic:, azure:, bedrock:, ollama:, mistral:, litellm:, openai:responses:, … have none)."""
    pid = getattr(provider, "id", None)
    if not isinstance(pid, str):
        return None
    if pid.startswith(("google:", "vertex:")):
        return "tools"
    if pid.startswith("openai:"):
        parts = pid.split(":")
        return None if len(parts) > 2 and parts[1] in _OPENAI_NOT_CHAT else "functions"
    if pid.startswith(_OPENAI_COMPATIBLE) and not pid.startswith("groq:responses:"):
        return "functions"
    return None


class _CallError(Exception):
    pass


def _js_stringify_or_undefined(value: Any) -> str:
    return "undefined" if value is _UNDEFINED else js_json(value)


_UNDEFINED = object()


def _load_definitions(value: Any, provider: Any) -> Any:
    """`file://tools.json|yaml` (also inside a list, whose arrays are then flattened) as promptfoo
    loads tool and function definitions; script-backed definitions are not supported."""
    if isinstance(value, list):
        loaded = [_load_definitions(v, provider) for v in value]
        if loaded and all(isinstance(v, list) for v in loaded):
            return [item for v in loaded for item in v]
        return loaded
    if isinstance(value, str) and value.startswith("file://"):
        from pathlib import Path

        from factcli import sources
        from factcli.errors import ConfigError

        path, func = sources.ref_path(value, Path(getattr(provider, "base_dir", None) or Path.cwd()))
        if func or path.suffix.lower() not in (".json", ".yaml", ".yml"):
            raise AssertionError_(f"cannot load tool definitions from {value}: use a .json or .yaml file")
        try:
            return sources.load_structured(path)
        except ConfigError as exc:
            raise AssertionError_(f"Failed to load tools from {value}: {exc}") from None
    return value


def _provider_config(provider: Any) -> dict:
    spec = getattr(provider, "spec", None)
    config = getattr(spec, "config", None) if spec is not None else getattr(provider, "config", None)
    return config if isinstance(config, dict) else {}


def validate_function_call(output: Any, functions: Any, variables: dict, provider: Any = None) -> None:
    """promptfoo's validateFunctionCall; raises _CallError with promptfoo's message."""
    if output is None:
        raise _CallError("Cannot use 'in' operator to search for 'function_call' in null")
    if isinstance(output, dict) and "function_call" in output:
        output = output["function_call"]
    call = output
    if not (isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(call.get("arguments"), str)):
        raise _CallError(f"OpenAI did not return a valid-looking function call: {_js_stringify_or_undefined(call)}")
    functions = templating.render_value(functions, variables) if variables else functions
    functions = _load_definitions(functions, provider)
    try:
        arguments = json_parse(call["arguments"])
    except ValueError as exc:
        raise _CallError(f"Function call arguments are not valid JSON: {exc}") from None
    name = call["name"]
    schema = None
    if isinstance(functions, list):
        for fn in functions:
            if isinstance(fn, dict) and fn.get("name") == name:
                schema = fn.get("parameters")
                break
    if schema is None:
        raise _CallError(f'Called "{name}", but there is no function with that name')
    try:
        errors = compile_schema(schema).errors(jsify(arguments))
    except SchemaError as exc:
        raise _CallError(str(exc)) from None
    if errors:
        raise _CallError(f'Call to "{name}" does not match schema: {js_json(errors)}')


_GEMINI_SCHEMA_KEYS = {"type", "format", "description", "nullable", "enum", "maxItems", "minItems", "properties",
                       "required", "propertyOrdering", "items"}
_GEMINI_TYPES = {"string": "STRING", "number": "NUMBER", "integer": "INTEGER", "boolean": "BOOLEAN", "array": "ARRAY",
                 "object": "OBJECT", "null": "STRING"}
_GEMINI_VALID_TYPES = {"TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"}


def _gemini_schema(schema: Any) -> Any:
    """promptfoo's sanitizeSchemaForGemini: Gemini's schema subset, upper-case types."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key not in _GEMINI_SCHEMA_KEYS:
            continue
        if key == "type" and isinstance(value, str):
            out[key] = _GEMINI_TYPES.get(value.lower(), value.upper())
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _gemini_schema(sub) if isinstance(sub, dict) else sub for name, sub in value.items()}
        elif key == "items" and isinstance(value, dict):
            out[key] = _gemini_schema(value)
        else:
            out[key] = value
    return out


def _lower_schema_types(node: Any) -> Any:
    """promptfoo's normalizeSchemaTypes: Gemini's upper-case types back to JSON Schema's."""
    if isinstance(node, list):
        return [_lower_schema_types(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str) and value in _GEMINI_VALID_TYPES:
            out[key] = value.lower()
        elif key == "type" and isinstance(value, list):
            out[key] = [t.lower() if isinstance(t, str) and t in _GEMINI_VALID_TYPES else t for t in value]
        else:
            out[key] = _lower_schema_types(value)
    return out


def _gemini_tool(tool: Any) -> Any:
    """promptfoo's normalizeTools for function declarations."""
    if not (isinstance(tool, dict) and isinstance(tool.get("functionDeclarations"), list)):
        return tool
    declarations = []
    for fd in tool["functionDeclarations"]:
        if isinstance(fd, dict):
            fd = dict(fd, parameters=_gemini_schema(fd["parameters"])) if fd.get("parameters") else \
                {k: v for k, v in fd.items() if k != "parameters"}
        declarations.append(fd)
    return dict(tool, functionDeclarations=declarations)


def validate_google_function_call(output: Any, tools: Any, variables: dict, provider: Any = None) -> None:
    """The validator of promptfoo's Google (AI Studio / Vertex / Live) providers."""
    try:
        parsed = json_parse(output) if isinstance(output, str) else output
        if isinstance(parsed, dict) and "toolCall" in parsed:
            parsed = parsed["toolCall"]
            calls = parsed.get("functionCalls", _UNDEFINED) if isinstance(parsed, dict) else _UNDEFINED
        elif isinstance(parsed, list):
            if any(item is None for item in parsed):
                raise ValueError("null item")
            calls = [item["functionCall"] for item in parsed if isinstance(item, dict) and "functionCall" in item]
        else:
            raise ValueError("Unrecognized function call format")
    except ValueError:
        raise _CallError(f"Google did not return a valid-looking function call: {_js_stringify_or_undefined(output)}") \
            from None
    tools = templating.render_value(tools, variables) if variables else tools
    tools = _load_definitions(tools, provider)
    if isinstance(tools, list):
        tools = [_gemini_tool(t) for t in tools]
    if not isinstance(calls, list):
        raise _CallError("functionCalls is not iterable")
    for call in calls:
        name = call.get("name") if isinstance(call, dict) else None
        args = call.get("args", _UNDEFINED) if isinstance(call, dict) else _UNDEFINED
        if isinstance(args, str):
            try:
                args = json_parse(args)
            except ValueError as exc:
                raise _CallError(f"Function call arguments are not valid JSON: {exc}") from None
        declarations = None
        if isinstance(tools, list):
            holder = next((t for t in tools if isinstance(t, dict) and "functionDeclarations" in t), None)
            declarations = holder.get("functionDeclarations") if holder else None
        declaration = next((fd for fd in declarations if isinstance(fd, dict) and fd.get("name") == name), None) \
            if isinstance(declarations, list) else None
        if declaration is None:
            raise _CallError(f'Called "{templating.js_string(name) if name is not None else "undefined"}", '
                             "but there is no function with that name")
        if args is _UNDEFINED or args is None:
            raise _CallError("Cannot convert undefined or null to object")
        parameters = declaration.get("parameters")
        has_args = bool(args) if isinstance(args, (dict, list, str)) else False
        if has_args and js_truthy(parameters):
            try:
                compiled = compile_schema(_lower_schema_types(parameters))
            except SchemaError as exc:
                raise _CallError(f"Tool schema doesn't compile with ajv: Error: {exc}. If this is a valid tool schema "
                                 "you may need to reformulate your assertion without is-valid-function-call.") from None
            errors = compiled.errors(jsify(args))
            if errors:
                raise _CallError(f'Call to "{name}":\n{js_json(call)}\ndoes not match schema:\n{js_json(errors)}')
        elif not (js_json(args) == "{}" and not js_truthy(parameters)):
            raise _CallError(f'Call to "{name}":\n{js_json(call)}\ndoes not match schema:\n{js_json(declaration)}')


@assertion("is-valid-openai-function-call", "is-valid-function-call")
def is_valid_function_call(ctx: AssertionContext) -> GradingResult:
    # promptfoo ignores `not-` here
    key = _function_schema_key(ctx.provider)
    if key is None:
        return ctx.verdict(False, "Provider does not have functionality for checking function call.")
    validate = validate_google_function_call if key == "tools" else validate_function_call
    try:
        validate(ctx.output, _provider_config(ctx.provider).get(key), ctx.vars, ctx.provider)
    except (_CallError, SchemaError) as exc:
        return ctx.verdict(False, str(exc))
    return ctx.verdict(True, "")


_MCP_ERROR = re.compile(r"MCP Tool Error \(([^)]+)\): (.+)")
_MCP_RESULT = re.compile(r"MCP Tool Result \(([^)]+)\):")


def _looks_like_tool_call(call: Any) -> bool:
    fn = call.get("function") if isinstance(call, dict) else None
    return isinstance(fn, dict) and isinstance(fn.get("name"), str) and isinstance(fn.get("arguments"), str)


@assertion("is-valid-openai-tools-call")
def is_valid_tools_call(ctx: AssertionContext) -> GradingResult:
    # promptfoo ignores `not-` here
    output = ctx.output
    text = output if isinstance(output, str) else js_json(output)
    if "MCP Tool Result" in text or "MCP Tool Error" in text:
        if "MCP Tool Error" in text:
            m = _MCP_ERROR.search(text)
            return ctx.verdict(False, f"MCP tool call failed for {m.group(1) if m else 'unknown'}: "
                                        f"{m.group(2) if m else 'unknown error'}")
        m = _MCP_RESULT.search(text)
        return GradingResult(passed=True, score=1.0, assertion=ctx.assertion,
                             reason=f"MCP tool call succeeded for {m.group(1) if m else 'unknown'}")
    if output is None:
        raise AssertionError_("Cannot use 'in' operator to search for 'tool_calls' in null")
    if isinstance(output, dict) and "tool_calls" in output:
        output = output["tool_calls"]
    if not isinstance(output, list) or not output or not all(_looks_like_tool_call(c) for c in output):
        return ctx.verdict(False, "OpenAI did not return a valid-looking tools response: "
                                    f"{_js_stringify_or_undefined(output)}")
    if ctx.provider is None:
        raise AssertionError_("Cannot read properties of undefined (reading 'config')")
    tools = _provider_config(ctx.provider).get("tools")
    if tools is not None and ctx.vars:
        tools = templating.render_value(tools, ctx.vars)
    tools = _load_definitions(tools, ctx.provider)
    if not js_truthy(tools):
        return ctx.verdict(False, "No tools configured in provider, but output contains tool calls")
    if not isinstance(tools, list):
        return ctx.verdict(False, "tools.filter is not a function")
    functions = [t["function"] for t in tools
                 if isinstance(t, dict) and t.get("type") == "function" and "function" in t]
    try:
        for call in output:
            validate_function_call(call["function"], functions, {})
    except (_CallError, SchemaError) as exc:
        return ctx.verdict(False, str(exc))
    return ctx.verdict(True, "")
