"""Python functions handed to factcli from code (`factcli.evaluate`, `factcli.check`) instead of named
in a file: each gets a name, by which a config refers to it (`python-function:NAME` as a provider or
grader id, `{type: python-function, value: NAME}` as an assertion), and is called here as promptfoo
calls a Python provider or assertion: async functions awaited, plain ones in a worker thread so that
a slow one does not hold up the other rows.

The names live for the process: the same function always has the same name, and two functions with
the same `__name__` get `name`, `name#2`, ...
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

PREFIX = "python-function"

_by_name: dict[str, Callable] = {}
_name_of: dict[int, str] = {}  # id(fn) -> name; _by_name holds fn, so the id is never reused
_lock = threading.Lock()


def register(fn: Callable) -> str:
    """The name of `fn`, given on first sight."""
    with _lock:
        name = _name_of.get(id(fn))
        if name is not None:
            return name
        base = getattr(fn, "__name__", None) or type(fn).__name__
        name, n = base, 1
        while name in _by_name:
            n += 1
            name = f"{base}#{n}"
        _by_name[name] = fn
        _name_of[id(fn)] = name
        return name


def lookup(name: str) -> Callable | None:
    return _by_name.get(name)


def missing(name: str) -> str:
    """Why a name finds no function: such names only exist in the process that registered them."""
    return (f"no Python function named '{name}' was passed to factcli.evaluate() or factcli.check() in this "
            "process (from the command line, use python:file.py:fn or file://file.py:fn instead)")


def _fit(fn: Callable, args: tuple) -> tuple:
    """promptfoo passes (prompt, options, context) and (output, context); a function that takes fewer
    (`lambda prompt: ...`) gets the first ones."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: give it everything
        return args
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return args
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return args[: len(positional)]


def _is_async(fn: Callable) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


async def call(fn: Callable, *args: Any) -> Any:
    """Call `fn` with the arguments it takes; an awaitable it returns is awaited."""
    args = _fit(fn, args)
    if _is_async(fn):
        result = await fn(*args)
    else:
        result = await asyncio.to_thread(fn, *args)
    if inspect.isawaitable(result):
        result = await result
    return result
