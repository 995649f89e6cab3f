"""Script assertions: `javascript` (in the shared Node worker) and `python` (in-process), plus
`assertScoringFunction`. Results, reasons and failure modes follow promptfoo 0.121.20:

javascript
- inline code: one line is an expression (or `const …; expr`), several lines are a function body
  with `return`; `output` and `context` are in scope; the value is rendered with the vars first.
  `file://x.js[:fn]` calls the (default or named) export as fn(output, context).
- a boolean passes as is; a number passes when > 0, or >= `threshold` when one is set, and is the
  score; a GradingResult ({pass, score, reason, …}) is used as is. `not-` flips pass.
- inline code that throws or returns anything else fails with "Custom function threw error: …";
  a file function that throws makes the row an ERROR, as in promptfoo.

python
- inline code becomes `def main(output, context):` with `return <expression>` for one line or the
  lines as its body; `file://x.py[:fn]` calls fn (default `get_assert`) in-process, sync functions
  in a thread. Arguments are JSON copies, as promptfoo's subprocess receives them.
- bool / "true" / "false", a number (or numeric text), a {pass, score, reason} dict (snake_case
  keys accepted, JSON text accepted); a dict's score below `threshold` fails.
- code that raises fails the assertion (never an ERROR row): "Error running Python script: …".

python-function
- a Python function passed to the Python API (`factcli.evaluate`, `factcli.check`), named by
  scripting/callables.py: fn(output, context), its result read as a python assertion's.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from factcli import templating
from factcli.assertions.js_semantics import js_json, js_truthy
from factcli.errors import ConfigError
from factcli.scoring.registry import PASSED, AssertionContext, AssertionError_, assertion
from factcli.scripting.python import ScriptError, run_python_file, run_python_inline
from factcli.scripting.values import is_grading_result, is_number, numbers_of, plain, tokens_of
from factcli.sources import JS_SUFFIXES, PY_SUFFIXES, TS_SUFFIXES, is_file_ref
from factcli.types import Assertion, GradingResult

# ---------------------------------------------------------------- config-time checks


def _resolve_file(ref: str, base: Path, file: str, where: str, kinds: tuple[str, ...], what: str) -> str:
    from factcli.sources import ref_path

    path, func = ref_path(ref, base)
    suffix = path.suffix.lower()
    allowed = (JS_SUFFIXES + TS_SUFFIXES if "js" in kinds else ()) + (PY_SUFFIXES if "py" in kinds else ())
    if suffix not in allowed:
        shown = (JS_SUFFIXES + (".ts",) if "js" in kinds else ()) + ((".py",) if "py" in kinds else ())
        raise ConfigError(f"{what} must be a {' or '.join(shown)} file, got {path.name}", file, where)
    from factcli.sources import is_file

    if not is_file(path):
        raise ConfigError(f"file not found: {path}", file, where)
    if suffix in TS_SUFFIXES:
        from factcli.scripting.node import check_typescript

        check_typescript(path, file, where)
    return f"file://{path.resolve()}" + (f":{func}" if func else "")



def _need_node(what: str, instead: str, file: str, where: str) -> None:
    from factcli.scripting.node import NodeNotFound, require_node

    try:
        require_node(what, instead)
    except NodeNotFound as exc:
        raise ConfigError(str(exc), file, where) from None


def check_script_value(typ: str, value: Any, base: Path, file: str, where: str) -> str:
    """Validate a javascript/python assertion value at load time; file references become absolute."""
    kind = typ[4:] if typ.startswith("not-") else typ
    if not isinstance(value, str):
        raise ConfigError(f"a {kind} assertion's value must be a string (code, or file://…), "
                          f"got {type(value).__name__}", file, where)
    if kind == "javascript":
        _need_node("javascript assertions", "a python assertion", file, where)
    if is_file_ref(value):  # the one rule of file or inline code (config/stored_trust.py reads it too)
        if kind == "javascript":
            return _resolve_file(value, base, file, where, ("js",), "a javascript assertion file")
        return _resolve_file(value, base, file, where, ("py",), "a python assertion file")
    return value


def check_scoring_function(value: Any, base: Path, file: str, where: str) -> str:
    """`assertScoringFunction`: a file://x.py[:fn] or file://x.js[:fn] reference, made absolute."""
    if not isinstance(value, str) or not value.startswith("file://"):
        raise ConfigError("assertScoringFunction must be a file reference: file://scoring.py:fn or "
                          "file://scoring.js:fn", file, where)
    resolved = _resolve_file(value, base, file, where, ("js", "py"), "assertScoringFunction")
    if not _is_python_ref(resolved):
        _need_node("javascript scoring functions", "a Python scoring function (file://scoring.py:fn)", file, where)
    return resolved


def _is_python_ref(ref: str) -> bool:
    from factcli.sources import ref_path

    return ref_path(ref, Path.cwd())[0].suffix.lower() in PY_SUFFIXES


# ---------------------------------------------------------------- what user code receives


def _provider_json(provider: Any) -> dict | None:
    if provider is None:
        return None
    spec = getattr(provider, "spec", provider)
    return {"id": getattr(provider, "id", None) or getattr(spec, "id", None),
            "label": getattr(spec, "label", None) or "",
            "config": getattr(provider, "config", None) or getattr(spec, "config", None) or {}}


def script_context(ctx: AssertionContext) -> dict:
    """promptfoo's AssertionValueFunctionContext, as JSON."""
    a = ctx.assertion
    test = dict(ctx.test.raw) if ctx.test is not None else {}
    test["vars"] = ctx.vars
    out: dict[str, Any] = {"prompt": ctx.prompt, "vars": ctx.vars, "test": test}
    r = ctx.response
    if r is not None and r.logprobs is not None:
        out["logProbs"] = r.logprobs
    provider = _provider_json(ctx.provider)
    if provider is not None:
        out["provider"] = provider
    if r is not None:
        response: dict[str, Any] = {"output": r.output, "tokenUsage": r.token_usage.to_json(), "cached": r.cached}
        if r.cost is not None:
            response["cost"] = r.cost
        if r.finish_reason is not None:
            response["finishReason"] = r.finish_reason
        response["metadata"] = r.metadata
        out["providerResponse"] = response
    if a.raw.get("config") is not None:
        out["config"] = copy.deepcopy(a.config)
    if r is not None and r.metadata is not None:
        out["metadata"] = r.metadata
    return plain(out)


# ---------------------------------------------------------------- result normalisation


def _js(x: Any) -> str:
    return templating.js_string(x)


def _from_dict(d: dict, passed: bool, reason: str, ctx: AssertionContext) -> GradingResult:
    """A GradingResult from a user's {pass, score, reason, namedScores?, componentResults?, …}."""
    metadata = d.get("metadata") if isinstance(d.get("metadata"), dict) else {}
    return GradingResult(
        passed=passed, score=float(d["score"]), reason=reason, assertion=ctx.assertion,
        named_scores=numbers_of(d.get("namedScores")), named_score_weights=numbers_of(d.get("namedScoreWeights")),
        tokens_used=tokens_of(d.get("tokensUsed")), metadata=dict(metadata),
        component_results=_children(d.get("componentResults")),
    )


def _children(value: Any) -> list[GradingResult]:
    """A script's nested componentResults, kept as returned (promptfoo checks only the top level). They
    never change the row's pass, score or named scores; the scorer lists them after their parent, one
    level deep, and they count as passed or failed assertions of the column (promptfoo-features B §2)."""
    if not isinstance(value, list):
        return []
    return [_child(c, i) for i, c in enumerate(value)]


def _child(c: Any, i: int) -> GradingResult:
    if not isinstance(c, dict):
        # promptfoo makes a null child an ERROR row and spreads a string into a map of its characters
        # (B §2.6); a child that is no object is a failed component saying so
        return GradingResult(False, 0.0, f"componentResults[{i}] is not a grading result: {js_json(c)}")
    score, reason = c.get("score"), c.get("reason")
    metadata = c.get("metadata")
    return GradingResult(
        passed=js_truthy(c.get("pass")), score=float(score) if is_number(score) and score == score else 0.0,
        reason=reason if isinstance(reason, str) else "", assertion=_child_assertion(c.get("assertion")),
        named_scores=numbers_of(c.get("namedScores")), named_score_weights=numbers_of(c.get("namedScoreWeights")),
        tokens_used=tokens_of(c.get("tokensUsed")), component_results=_children(c.get("componentResults")),
        metadata=dict(metadata) if isinstance(metadata, dict) else {},
    )


def _child_assertion(raw: Any) -> Assertion | None:
    """A child's own `assertion` object, which it keeps when listed after its parent."""
    if not isinstance(raw, dict):
        return None
    metric, weight = raw.get("metric"), raw.get("weight", 1.0)
    return Assertion(type=str(raw.get("type", "")), value=raw.get("value"),
                     metric=metric if isinstance(metric, str) else None,
                     weight=float(weight) if is_number(weight) else 1.0, raw=dict(raw))


def _with_suffix(reason: str, suffix: Any) -> str:
    return f"{reason}\n{suffix}" if isinstance(suffix, str) and suffix else reason


def _normalize(ctx: AssertionContext, result: Any, code_label: str, suffix: Any) -> GradingResult:
    """A boolean, number or GradingResult dict -> the assertion's result, with `not-` applied."""
    inverse = ctx.inverse
    threshold = ctx.assertion.threshold

    def failed(raw_pass: bool) -> str:
        return _with_suffix(f"{code_label} returned {'true' if raw_pass else 'false'}", suffix)

    if isinstance(result, bool):
        passed = result != inverse
        return ctx.verdict(passed, failed(result))
    if is_number(result):
        raw_pass = result > 0 if threshold is None else result >= threshold
        passed = bool(raw_pass) != inverse
        return GradingResult(passed, float(result), PASSED if passed else failed(bool(raw_pass)),
                             ctx.assertion)
    passed = result["pass"] != inverse
    if passed == result["pass"]:
        reason = result["reason"]
    else:
        reason = PASSED if passed else f"{code_label} returned {'true' if result['pass'] else 'false'}"
    return _from_dict(result, passed, reason, ctx)


# ---------------------------------------------------------------- javascript


def _raw_value(ctx: AssertionContext) -> Any:
    """The assertion value as written (file references stay relative, as promptfoo shows them)."""
    return ctx.assertion.raw.get("value", ctx.assertion.value)


@assertion("javascript", needs_value=True)
async def javascript(ctx: AssertionContext) -> GradingResult:
    from factcli.scripting.node import JSError, NodeWorkerError, get_worker, js_value
    from factcli.sources import ref_path

    value = ctx.value
    if not isinstance(value, str):
        raise AssertionError_("javascript assertion must have a string value")
    is_file = is_file_ref(value)
    shown = _raw_value(ctx) if is_file else value
    suffix = shown.rstrip() if isinstance(shown, str) else None
    payload: dict[str, Any] = {"output": plain(ctx.output), "context": script_context(ctx)}
    if is_file:
        path, func = ref_path(value, Path.cwd())
        payload.update(file=str(path), fn=func, label=shown)
    else:
        payload["code"] = value
    try:
        answer = await get_worker().call("assert", payload)
    except JSError as exc:
        if is_file and exc.phase in ("load", "call"):
            raise AssertionError_(exc.stack) from None  # promptfoo: the row is an ERROR
        reason = f"Custom function threw error: {exc.js_message}\nStack Trace: {exc.stack}"
        return GradingResult(False, 0.0, _with_suffix(reason, suffix), ctx.assertion)
    except NodeWorkerError as exc:
        raise AssertionError_(str(exc)) from None
    return _normalize(ctx, js_value(answer), "Custom function", suffix)


# ---------------------------------------------------------------- python

class _ResultShapeError(Exception):
    pass


_FLOAT_PREFIX = re.compile(r"^[\s\ufeff\xa0]*([+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?))")


def parse_float(text: str) -> float | None:
    """JavaScript's parseFloat: the longest numeric prefix, else None (NaN)."""
    m = _FLOAT_PREFIX.match(text)
    if not m:
        return None
    s = m.group(1)
    if s.lstrip("+-") == "Infinity":
        return float("-inf") if s.startswith("-") else float("inf")
    return float(s)


def _js_text(value: Any) -> str:
    """JavaScript's String(value) for a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "[object Object]"
    return templating.js_string(value)


def _snake_to_camel(obj: dict) -> dict:
    out = dict(obj)
    for snake, camel in (("pass_", "pass"), ("named_scores", "namedScores"), ("component_results", "componentResults"),
                         ("tokens_used", "tokensUsed")):
        if snake in out and camel not in out:
            out[camel] = out[snake]
    if isinstance(out.get("componentResults"), list):
        out["componentResults"] = [_snake_to_camel(c) if isinstance(c, dict) else c for c in out["componentResults"]]
    return out


def _script_result(ctx: AssertionContext, result: Any, suffix: Any, code_label: str = "Python code",
                   language: str = "Python") -> GradingResult:
    """promptfoo's normalizeScriptResult."""
    shape = f"{language} assertion must return a boolean, number, or {{pass, score, reason}} object."
    lower = result.lower() if isinstance(result, str) else None
    if result is True or lower == "true":
        return _normalize(ctx, True, code_label, suffix)
    if result is False or lower == "false":
        return _normalize(ctx, False, code_label, suffix)
    if isinstance(result, str) and result.startswith("{"):
        try:
            parsed = json.loads(result)
        except ValueError as exc:
            raise _ResultShapeError(f"Invalid JSON: {exc} when parsing result: {result}") from None
        if not isinstance(parsed, dict):
            raise _ResultShapeError(f"{shape} Got instead: {result}")
        result = parsed
    if isinstance(result, list):
        result = {str(i): v for i, v in enumerate(result)}  # what `{...array}` makes of it
    if isinstance(result, dict):
        mapped = _snake_to_camel(result)
        if not is_grading_result(mapped):
            raise _ResultShapeError(f"{shape} Got instead:\n{js_json(mapped, indent=2)}")
        threshold = ctx.assertion.threshold
        if threshold is not None and mapped["score"] < threshold:
            mapped["pass"] = False
            note = f"{language} score {_js(mapped['score'])} is less than threshold {_js(threshold)}"
            mapped["reason"] = f"{note}: {mapped['reason']}" if mapped["reason"] else note
        return _normalize(ctx, mapped, code_label, suffix)
    score = parse_float(_js_text(result))
    if score is None:
        raise _ResultShapeError(f"{shape} Instead got:\n{_js_text(result)}")
    return _normalize(ctx, score, code_label, suffix)


@assertion("python", needs_value=True)
async def python(ctx: AssertionContext) -> GradingResult:
    from factcli.sources import ref_path

    value = ctx.value
    if not isinstance(value, str):
        raise AssertionError_("python assertion must have a string value")
    suffix = _raw_value(ctx)
    args = (plain(ctx.output), script_context(ctx))
    if is_file_ref(value):
        path, func = ref_path(value, Path.cwd())
        try:
            result = await run_python_file(path, func or "get_assert", *args)
        except ScriptError as exc:
            return GradingResult(False, 0.0, str(exc), ctx.assertion)
    else:
        try:
            result = await run_python_inline(value, *args)
        except ScriptError as exc:
            return GradingResult(False, 0.0, f"Python code execution failed: {exc}", ctx.assertion)
    try:
        return _script_result(ctx, result, suffix)
    except _ResultShapeError as exc:
        return GradingResult(False, 0.0, f"Python code execution failed: {exc}", ctx.assertion)


def _function_preflight(a: Assertion, base: Path, test=None) -> list[str]:
    from factcli.scripting import callables

    return [] if callables.lookup(str(a.value)) is not None else [callables.missing(str(a.value))]


@assertion("python-function", needs_value=True, preflight=_function_preflight)
async def python_function(ctx: AssertionContext) -> GradingResult:
    """A Python function passed to the Python API (scripting/callables.py): fn(output, context), read as
    a python assertion's result; the output it gets is the object itself, not a JSON copy."""
    from factcli.scripting import callables

    name = str(ctx.assertion.value)
    fn = callables.lookup(name)
    if fn is None:
        raise AssertionError_(callables.missing(name))
    try:
        result = await callables.call(fn, ctx.output, script_context(ctx))
    except Exception as exc:  # as for a python assertion: the assertion fails, the row is no ERROR
        return GradingResult(False, 0.0, f"Python function {name} raised {type(exc).__name__}: {exc}", ctx.assertion)
    if isinstance(result, GradingResult):
        return _normalize(ctx, {"pass": result.passed, "score": result.score, "reason": result.reason,
                                "metadata": result.metadata}, f"Python function {name}", None)
    try:
        return _script_result(ctx, result, None, f"Python function {name}")
    except _ResultShapeError as exc:
        return GradingResult(False, 0.0, f"Python function {name}: {exc}", ctx.assertion)


# ---------------------------------------------------------------- assertScoringFunction
