"""Output transforms (`transform`, provider `transform`, `options.transform` / `postprocess`).

As in promptfoo, a transform is a JavaScript expression (one line: `output.trim()`), a JavaScript
function body (several lines, with `return`), `file://x.js[:fn]`, or `file://x.py[:fn]`
(default `get_transform`, then factcli's earlier default `transform`). JavaScript runs in the
shared Node worker with `output` and `context` in scope; Python runs in-process as
fn(output, context). A transform that throws, or returns null/undefined/None, fails with
promptfoo's messages ("Transform failed (…): …", "Transform function did not return a value").

At load time file references are made absolute and checked, and inline JavaScript is compiled
(not run) by the worker, so a typo or a missing Node.js is a config error before any call.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from factcli.errors import ConfigError
from factcli.sources import JS_SUFFIXES, PY_SUFFIXES, SCRIPT_SUFFIXES, TS_SUFFIXES, is_file_ref

NODE_FOR = ("javascript transforms", "a Python transform (file://transforms.py:fn)")


class TransformError(Exception):
    """A transform failed; the message is promptfoo's."""


def transform_label(spec: str) -> str:
    """promptfoo's label for a transform in error messages."""
    if is_file_ref(spec):
        return "[file transform]"
    single = " ".join(spec.split())
    return f"[inline transform]: {single if len(single) <= 80 else single[:79] + '…'}"


def check_transform(spec: Any, file: str, where: str, base_dir: Path) -> str | None:
    """Validate a transform at load time; returns it with an absolute path."""
    if spec is None:
        return None
    if not isinstance(spec, str):
        raise ConfigError("a transform must be a string", file, where)
    if is_file_ref(spec):  # the one rule of file or inline code (config/stored_trust.py reads it too)
        from factcli.sources import ref_path

        path, func = ref_path(spec, base_dir)
        suffix = path.suffix.lower()
        if suffix not in SCRIPT_SUFFIXES:
            raise ConfigError(f"a transform file must be .py or .js or .ts (file://x.py:fn, file://x.js:fn), got "
                              f"{spec!r}", file, where)
        from factcli.sources import is_file

        if not is_file(path):
            raise ConfigError(f"transform file not found: {path}", file, where)
        if suffix in JS_SUFFIXES:
            _need_node(file, where)
        elif suffix in TS_SUFFIXES:
            from factcli.scripting.node import check_typescript

            check_typescript(path, file, where)
        return f"file://{path.resolve()}" + (f":{func}" if func else "")
    if not spec.strip():
        raise ConfigError("empty transform", file, where)
    _need_node(file, where)
    _check_syntax(spec, file, where)
    return spec


def _need_node(file: str, where: str) -> None:
    from factcli.scripting.node import NodeNotFound, require_node

    try:
        require_node(*NODE_FOR)
    except NodeNotFound as exc:
        raise ConfigError(str(exc), file, where) from None


def _check_syntax(code: str, file: str, where: str) -> None:
    from factcli.scripting.node import JSError, NodeWorkerError, get_worker

    try:
        get_worker().call_sync("compile", {"code": code, "inputType": "output"}, timeout=30)
    except JSError as exc:
        raise ConfigError(f"invalid JavaScript transform: {exc.name}: {exc.js_message}", file, where) from None
    except NodeWorkerError as exc:
        raise ConfigError(f"cannot check the JavaScript transform: {exc}", file, where) from None


async def apply_transform(spec: str, output: Any, context: dict, base_dir: Path | None = None) -> Any:
    from factcli.sources import ref_path

    label = transform_label(spec)
    if is_file_ref(spec):
        path, func = ref_path(spec, base_dir or Path.cwd())
        if path.suffix.lower() in PY_SUFFIXES:
            result = await _python_transform(path, func, output, context, label)
        else:
            result = await _js_transform({"file": str(path), "fn": func}, output, context, label)
    else:
        result = await _js_transform({"code": spec}, output, context, label)
    if result is None:
        raise TransformError(f"Transform function did not return a value\n\n{label}")
    return result


async def _python_transform(path: Path, func: str | None, output: Any, context: dict, label: str) -> Any:
    from factcli.scripting.python import load_module

    try:
        module = load_module(path)
    except Exception as exc:
        raise TransformError(f"Transform failed ({label}): {path.name}: import failed: "
                             f"{type(exc).__name__}: {exc}") from exc
    names = [func] if func else ["get_transform", "transform"]
    fn = next((getattr(module, n) for n in names if callable(getattr(module, n, None))), None)
    if fn is None:
        raise TransformError(f"Transform failed ({label}): {path.name} has no function "
                             + " or ".join(f"'{n}'" for n in names))
    try:
        if inspect.iscoroutinefunction(fn):
            return await fn(output, context)
        return await asyncio.to_thread(fn, output, context)
    except Exception as exc:
        raise TransformError(f"Transform failed ({label}): {type(exc).__name__}: {exc}") from exc


async def _js_transform(target: dict, output: Any, context: dict, label: str) -> Any:
    from factcli.scripting.node import get_worker

    with js_transform_failures(label):
        answer = await get_worker().call("transform", {**target, "input": output, "context": context,
                                                       "inputType": "output"})
    return js_transform_value(answer)


@contextmanager
def js_transform_failures(label: str) -> Iterator[None]:
    """A JavaScript transform's failure (an output's or transformVars'), in promptfoo's words."""
    from factcli.scripting.node import JSError, NodeWorkerError

    try:
        yield
    except JSError as exc:
        raise TransformError(f"Transform failed ({label}): {exc.js_message}") from None
    except NodeWorkerError as exc:
        raise TransformError(f"Transform failed ({label}): {exc}") from None


def js_transform_value(answer: dict) -> Any:
    """The worker's answer to a transform: None for JavaScript's undefined."""
    return None if answer.get("undefined") else answer.get("value")
