"""Running a test generator (`tests: file://gen.py:fn`, `file://gen.js[:fn]`) once, while the config
loads, before any model call (promptfoo-features §4): Python in-process, JavaScript in the shared Node
worker. This module returns what the generator gave; config/testsets.py checks it and turns it into tests.

Arguments are promptfoo's: none (Python) or `undefined` (JavaScript) without a `config:`, else the config
as the only argument. A `.py` without `:fn` calls `generate_tests`; a `.js` without `:fn` uses the default
export, calling it if it is a function and taking it as it is otherwise (an array of tests, or one test).
"""

from __future__ import annotations

import inspect
import traceback
from pathlib import Path
from typing import Any

from factcli.scripting.python import wait_for
from factcli.scripting.values import plain
from factcli.sources import PY_SUFFIXES

PY_DEFAULT = "generate_tests"
_NO_CONFIG = object()

# The module's default export (an ES module's `export default`, or CommonJS `module.exports`), called with
# the config when it is a function. Run through the worker's `transform` op: `output` is the file's path,
# loaded as the worker loads every user file (TypeScript too).
_JS_DEFAULT_EXPORT = (
    "globalThis.__factcliNamespace(output).then(async (ns) => {"
    " let m = ns.default;"
    " if (m && typeof m === 'object' && !Array.isArray(m) && m.default !== undefined) m = m.default;"
    " if (m === undefined) throw new Error('it has no default export; name the function to call, as '"
    " + context.ref + ':<function>');"
    " return typeof m === 'function' ? await m(...context.args) : m; })"
)


class GeneratorError(Exception):
    """The generator could not run or raised; the message is one line naming the file and function."""


def generator_name(path: Path, func: str | None) -> str:
    return f"{path.name}:{func}" if func else path.name


def run_generator(path: Path, func: str | None, config: Any = _NO_CONFIG) -> Any:
    """What the generator returns, as plain JSON-like data. `config`: the `{path, config}` form's config."""
    args = [] if config is _NO_CONFIG else [config]
    if path.suffix.lower() in PY_SUFFIXES:
        return _run_python(path, func or PY_DEFAULT, args)
    return _run_js(path, func, args)


def _run_python(path: Path, func: str, args: list) -> Any:
    from factcli.scripting.python import load_python_function

    name = generator_name(path, func)
    try:
        fn = load_python_function(path, func)
    except AttributeError:
        raise GeneratorError(f"{path.name} has no function '{func}'"
                             + (" (without ':fn' promptfoo calls generate_tests)" if func == PY_DEFAULT else "")
                             ) from None
    except Exception as exc:  # the module failed to import: its own error, where it happened
        raise GeneratorError(f"importing {path.name} failed: {_one_line(exc, path)}") from None
    try:
        result = fn(*args)
        if inspect.isawaitable(result):
            result = wait_for(result)
    except TypeError as exc:
        hint = ""
        if not args and "required positional argument" in str(exc):
            hint = " (it is called with no arguments: give the parameter a default, or use {path, config})"
        raise GeneratorError(f"test generator {name} raised {_one_line(exc, path)}{hint}") from None
    except Exception as exc:
        raise GeneratorError(f"test generator {name} raised {_one_line(exc, path)}") from None
    try:
        return plain(result)
    except (TypeError, ValueError, RecursionError) as exc:
        raise GeneratorError(f"test generator {name} returned something that is not JSON data: {exc}") from None


def _one_line(exc: BaseException, path: Path) -> str:
    """`ValueError: boom (gen.py line 12)`: the exception and the last line of the user's file it passed."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    names = {str(path), str(path.resolve())}
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename in names]
    if isinstance(exc, SyntaxError) and exc.filename in names:
        lines.append(exc.lineno)
    return f"{text} ({path.name} line {lines[-1]})" if lines and lines[-1] else text


def _run_js(path: Path, func: str | None, args: list) -> Any:
    from factcli.scripting.node import JSError, NodeNotFound, NodeWorkerError, get_worker, js_value, require_node

    name = generator_name(path, func)
    try:
        require_node("JavaScript test generators", "a Python generator (file://tests.py:fn)")
    except NodeNotFound as exc:
        raise GeneratorError(str(exc)) from None
    try:
        if func:
            answer = get_worker().call_sync("call", {"file": str(path.resolve()), "fn": func, "args": args})
        else:
            answer = get_worker().call_sync("transform", {
                "code": _JS_DEFAULT_EXPORT, "input": str(path.resolve()),
                "context": {"args": args, "ref": f"file://{path.name}"}, "inputType": "output"})
    except JSError as exc:
        raise GeneratorError(f"test generator {name} failed: {exc.name}: {' '.join(exc.js_message.split())}") from None
    except NodeWorkerError as exc:
        raise GeneratorError(f"test generator {name} could not run: {exc}") from None
    return None if answer.get("undefined") else js_value(answer)
