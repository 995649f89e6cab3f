"""The user code a row runs before its prompt is sent: script-valued vars (`file://x.py`, `file://x.js`),
prompt functions (`file://prompts.py:fn`, a `.py` run as a script, `file://prompts.js[:fn]`), and
`transformVars` (inline JavaScript, `file://x.js[:fn]`, `file://x.py[:fn]`).

Python runs in-process (each file imported once); JavaScript in the shared Node worker (its `call` and
`transform` ops); a `.py` prompt without `:fn` runs as a script, as promptfoo does. Every failure is a
`RowCodeError` whose message names the file and the function (the row becomes an ERROR), except
transformVars, which fails with promptfoo's "Transform failed (…)" wording as a `TransformError`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from factcli.scripting.python import wait_for
from factcli.scripting.transforms import TransformError, js_transform_failures, js_transform_value, transform_label
from factcli.scripting.values import plain
from factcli.sources import PY_SUFFIXES, is_file_ref


class RowCodeError(Exception):
    """A script var or prompt function failed; the message names it."""


def split_ref(ref: str) -> tuple[Path, str | None]:
    """`file:///abs/x.py:fn` -> (path, 'fn'). References are made absolute when the config is loaded."""
    from factcli.sources import ref_path

    return ref_path(ref, Path.cwd())


def _shown(path: Path, func: str | None) -> str:
    return f"{path}:{func}" if func else str(path)


# ------------------------------------------------------------------ script-valued vars


async def call_var_script(ref: str, var_name: str, prompt: str, other_vars: dict, provider: dict) -> Any:
    """The value of a script var (promptfoo-features §3): Python `get_var(var_name, prompt, other_vars)`
    (or the `:fn` given), JavaScript's default export (or `:fn`) with `(varName, prompt, otherVars,
    provider)`. The script returns `{output}` or `{error}`."""
    path, func = split_ref(ref)
    if path.suffix.lower() in PY_SUFFIXES:
        return await _python_var(path, func or "get_var", var_name, prompt, other_vars)
    return await _js_var(path, func, var_name, prompt, other_vars, provider)


async def _python_var(path: Path, func: str, var_name: str, prompt: str, other_vars: dict) -> Any:
    from factcli.scripting.python import call_python, load_python_function, python_error

    try:
        fn = load_python_function(path, func)
        result = plain(await call_python(fn, var_name, prompt, plain(other_vars)))
    except Exception as exc:
        message = str(python_error(exc, (str(path), str(path.resolve()))))
        raise RowCodeError(message.replace("Error running Python script:",
                                           f"Error running Python script {_shown(path, func)}:", 1)) from None
    if isinstance(result, dict) and result.get("error"):
        raise RowCodeError(f"Error running Python script {_shown(path, func)}: {result['error']}")
    output = result.get("output") if isinstance(result, dict) else None
    if output is not None and not isinstance(output, str):
        raise RowCodeError(f"Python script {_shown(path, func)}: 'output' must be a string, got "
                           f"{type(output).__name__}")
    if not output:
        raise RowCodeError(f"Python script {_shown(path, func)} did not return any output "
                           "(return {\"output\": \"...\"})")
    return output.strip()  # promptfoo trims a Python script's output at both ends


async def _js_var(path: Path, func: str | None, var_name: str, prompt: str, other_vars: dict,
                  provider: dict) -> Any:
    value = await _js_call(path, func, [var_name, prompt, other_vars, provider])
    where = _shown(path, func)
    if isinstance(value, dict) and value.get("error"):
        raise RowCodeError(f"Error running {where}: {value['error']}")
    if isinstance(value, str):
        raise RowCodeError(f"Expected {where} to return {{ output: string }} but got a plain string")
    if not isinstance(value, dict) or "output" not in value:
        raise RowCodeError(f"Expected {where} to return {{ output: string }}")
    return value["output"]


async def _js_call(path: Path, func: str | None, args: list) -> Any:
    from factcli.scripting.node import JSError, NodeWorkerError, get_worker, js_value

    try:
        answer = await get_worker().call("call", {"file": str(path), "fn": func, "defaultName": "default",
                                                  "args": args})
    except JSError as exc:
        raise RowCodeError(f"Error running {_shown(path, func)}: {exc.stack}") from None
    except NodeWorkerError as exc:
        raise RowCodeError(f"Error running {_shown(path, func)}: {exc}") from None
    return None if answer.get("undefined") else js_value(answer)


# ------------------------------------------------------------------ prompt functions


async def call_prompt_function(ref: str, context: dict) -> Any:
    """What the prompt function returns for this row (a string, chat messages, or {prompt, config});
    `context` is promptfoo's {vars, provider: {id, label}, config}."""
    path, func = split_ref(ref)
    if path.suffix.lower() not in PY_SUFFIXES:
        value = await _js_call(path, func, [context])
        if value is None:
            raise RowCodeError(f"prompt function {_shown(path, func)} returned undefined; return a string, "
                               "a list of chat messages or {prompt, config}")
        return value
    if func is None:
        return await _python_prompt_script(path, context)
    from factcli.scripting.python import call_python, load_python_function, python_error

    try:
        fn = load_python_function(path, func)
        return plain(await call_python(fn, plain(context)))
    except Exception as exc:
        message = str(python_error(exc, (str(path), str(path.resolve()))))
        raise RowCodeError(message.replace("Error running Python script:",
                                           f"Error running prompt function {_shown(path, func)}:", 1)) from None


async def _python_prompt_script(path: Path, context: dict) -> str:
    """promptfoo runs a `.py` prompt without `:fn` as a script: the context JSON is argv[1], stdout is
    the prompt (lines joined, the last newline dropped)."""
    python = os.environ.get("PROMPTFOO_PYTHON") or sys.executable
    proc = await asyncio.create_subprocess_exec(
        python, str(path), json.dumps(plain(context), ensure_ascii=False), cwd=str(path.parent),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        tail = err.decode("utf-8", "replace").strip().splitlines()[-5:]
        raise RowCodeError(f"prompt script {path} exited with code {proc.returncode}: " + "\n".join(tail))
    return out.decode("utf-8", "replace").removesuffix("\n").removesuffix("\r")


# ------------------------------------------------------------------ transformVars


def transform_vars(spec: str, variables: dict) -> dict:
    """Run a test's transformVars once (promptfoo-features part B §1): the function gets (vars, context)
    with context {prompt: {}, uuid}; what it returns is merged over the vars. Synchronous: it runs while
    the run is planned, before the test's var arrays are expanded into rows."""
    label = transform_label(spec)
    context = {"prompt": {}, "uuid": str(uuid.uuid4())}
    if is_file_ref(spec):
        path, func = split_ref(spec)
        if path.suffix.lower() in PY_SUFFIXES:
            result = _python_transform_vars(path, func, variables, context, label)
        else:
            result = _js_transform_vars({"file": str(path), "fn": func}, variables, context, label)
    else:
        result = _js_transform_vars({"code": spec}, variables, context, label)
    if result is None:
        raise TransformError(f"Transform function did not return a value\n\n{label}")
    if not isinstance(result, dict):
        raise TransformError(f"Transform failed ({label}): transformVars must return an object of vars, "
                             f"got {type(result).__name__}")
    return {**variables, **result}


def _python_transform_vars(path: Path, func: str | None, variables: dict, context: dict, label: str) -> Any:
    from factcli.scripting.python import load_python_function

    name = func or "get_transform"
    try:
        fn = load_python_function(path, name)
        result = fn(plain(variables), context)
        if inspect.isawaitable(result):
            result = wait_for(result)
        return plain(result)
    except Exception as exc:
        raise TransformError(f"Transform failed ({label}): {path.name}:{name}: {type(exc).__name__}: {exc}") from None


def _js_transform_vars(target: dict, variables: dict, context: dict, label: str) -> Any:
    from factcli.scripting.node import get_worker

    with js_transform_failures(label):
        answer = get_worker().call_sync("transform", {**target, "input": variables, "context": context,
                                                      "inputType": "vars"})
    return js_transform_value(answer)
