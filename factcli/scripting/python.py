"""Running the user's Python: loading their files (once per process), wrapping inline code the way
promptfoo does, calling sync or async functions off the event loop, and turning their exceptions
into promptfoo's "Error running Python script" with a traceback of their own frames only."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import itertools
import linecache
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from factcli.activity import activity
from factcli.scripting.values import plain

_modules: dict[Path, object] = {}


def load_module(path: Path):
    """Import a user's .py file once per run (promptfoo imports it per call; same result, less cost)."""
    path = path.resolve()
    if path not in _modules:
        spec = importlib.util.spec_from_file_location(f"factcli_user_{abs(hash(path))}", path)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent))
        try:
            with activity(f"Importing {path.name}"):  # user modules may import heavy libraries
                spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(path.parent))
        _modules[path] = module
    return _modules[path]


_inline_ids = itertools.count(1)


_inline_cache: dict[str, Any] = {}


def build_python_script(code: str) -> str:
    """promptfoo's wrapper: `def main(output, context):` around the code."""
    if "\n" in code:
        m = re.search(r"^(?!\s*$)\s+", code, re.M)
        indent = m.group(0) if m else "    "
        body = "\n".join(indent + line for line in code.split("\n"))
    else:
        body = f"    return {code}"
    return f"import json\n\ndef main(output, context):\n{body}\n"


def _compile_inline(code: str):
    script = build_python_script(code)
    compiled = _inline_cache.get(script)
    if compiled is None:
        filename = f"<python assertion {next(_inline_ids)}>"
        linecache.cache[filename] = (len(script), None, script.splitlines(True), filename)
        compiled = compile(script, filename, "exec")
        _inline_cache[script] = compiled
    return compiled


class ScriptError(Exception):
    """User Python failed; the message is promptfoo's "Error running Python script: …"."""


def python_error(exc: BaseException, user_files: tuple[str, ...] = ()) -> ScriptError:
    """The user's exception with a traceback of their own frames only."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [i for i, f in enumerate(frames) if f.filename in user_files or f.filename.startswith("<python assertion")]
    lines = ["Traceback (most recent call last):\n"] + traceback.format_list(frames[mine[0]:]) if mine else []
    last = traceback.format_exception_only(type(exc), exc)
    lines += last
    head = last[-1].strip()  # "ZeroDivisionError: division by zero", "SyntaxError: invalid syntax"
    return ScriptError(f"Error running Python script: {head}\nStack Trace: {''.join(lines).rstrip()}")


async def call_python(fn, *args) -> Any:
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await asyncio.to_thread(fn, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


def wait_for(awaitable) -> Any:
    """An async function's result from code that is not async (config loading, planning), which may
    itself run inside an event loop (a notebook, the Python API): then on a loop of its own in a thread."""
    async def wait():
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, wait()).result()


def load_python_function(path: Path, name: str):
    """Import the user's file (once per process) and return its function `name`."""

    module = load_module(path)
    fn = getattr(module, name, None)
    if fn is None and "." in name:  # Class.method, as promptfoo's wrapper allows
        owner, _, attr = name.partition(".")
        fn = getattr(getattr(module, owner, None), attr, None)
    if fn is None:
        raise AttributeError(f"module '{path.stem}' has no attribute '{name}'")
    if not callable(fn):
        raise TypeError(f"'{name}' in {path.name} is not callable")
    return fn


async def run_python_file(path: Path, name: str, *args) -> Any:
    """Call name(*args) from the user's file; any failure -> ScriptError (promptfoo's runPython)."""
    try:
        fn = load_python_function(path, name)
        result = await call_python(fn, *args)
        return plain(result)
    except Exception as exc:
        raise python_error(exc, (str(path), str(path.resolve()))) from None


async def run_python_inline(code: str, *args) -> Any:
    try:
        namespace: dict[str, Any] = {"__name__": "factcli_python_assertion"}
        exec(_compile_inline(code), namespace)  # noqa: S102 - the user's own assertion code
        return plain(await call_python(namespace["main"], *args))
    except Exception as exc:
        raise python_error(exc) from None
