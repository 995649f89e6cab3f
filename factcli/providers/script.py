"""Providers that run the user's own code (`user_code = True`: code a stored run would run again):
`python:file.py[:fn]` / `file://file.py[:fn]` in-process (promptfoo's `call_api(prompt, options, context)`
contract), `file://x.js|.mjs|.cjs|.ts[:name]` in the Node worker (promptfoo's class with `callApi`),
`python-function:NAME` (a function passed to the Python API, scripting/callables.py) and `exec: command`."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import shlex
from pathlib import Path

from factcli.errors import ConfigError
from factcli.providers.base import (
    ERROR,
    TIMEOUT,
    Provider,
    ProviderCallError,
    register_provider,
    response_from_dict,
)
from factcli.providers.request import CallRequest
from factcli.scripting import callables
from factcli.scripting.python import load_module
from factcli.sources import JS_SUFFIXES, TS_SUFFIXES
from factcli.types import ProviderResponse


def _python_target(pid: str, base_dir: Path) -> tuple[Path, str]:
    rest = pid.split(":", 1)[1] if pid.startswith("python:") else pid[len("file://"):]
    func = "call_api"
    if ".py:" in rest:
        rest, func = rest.rsplit(":", 1)
    path = Path(rest).expanduser()
    return (path if path.is_absolute() else base_dir / path), func


# `file://x.js` or any JavaScript or TypeScript suffix (sources.JS_SUFFIXES, TS_SUFFIXES), optionally with `:name`
_JS_ID = re.compile(r"^file://(.+(?:%s))(?::([A-Za-z_$][\w$]*))?$" % "|".join(
    re.escape(s) for s in JS_SUFFIXES + TS_SUFFIXES), re.IGNORECASE)


def _js_target(pid: str, base_dir: Path) -> tuple[Path, str | None]:
    m = _JS_ID.match(pid)
    assert m is not None
    path = Path(m.group(1)).expanduser()
    return (path if path.is_absolute() else base_dir / path), m.group(2)


@register_provider(lambda pid: _JS_ID.match(pid) is not None)
class JavaScriptProvider(Provider):
    """promptfoo's JavaScript provider in factcli's Node worker (scripting/node.py): the file's default export,
    or the `:name` given, is a class made once with `{id, config, env}` (config with promptfoo's
    `basePath`), then given its label, whose `callApi(prompt, context, options)` returns a ProviderResponse; a function is
    taken as callApi itself. Calls are timed, paced and retried by run/calling/caller.py as every provider's."""

    cacheable = False  # user code may be stateful or read files; never serve it stale
    local = True  # it runs here; the row's cost is what it reports, as in promptfoo
    user_code = True

    @staticmethod
    def validate(spec, base_dir) -> None:
        from factcli.scripting.node import NodeWorkerError, require_node, typescript_way

        path, _ = _js_target(spec.id, base_dir)
        if not path.is_file():
            raise ConfigError(f"JavaScript provider file not found: {path} (a relative path is the config "
                              "folder's)")
        try:
            require_node("JavaScript providers", "a Python provider (file://provider.py)")
            if path.suffix.lower() in (".ts", ".mts", ".cts"):
                typescript_way(path, base_dir)
        except NodeWorkerError as exc:
            raise ConfigError(str(exc)) from None

    def _shown(self) -> str:
        path, func = _js_target(self.id, self.base_dir)
        return f"{path.name}:{func}" if func else path.name

    def _request(self) -> dict:
        path, func = _js_target(self.id, self.base_dir)
        options = {"id": self.id, "label": self.spec.label or "",
                   "config": {**self.config, "basePath": os.path.relpath(self.base_dir)}}
        key = json.dumps([self.id, self.spec.label, self.config, str(self.base_dir)], sort_keys=True, default=str)
        return {"file": str(path.resolve()), "fn": func, "key": key, "options": options}

    def preflight(self) -> list[str]:
        """The module loads and the provider is made (its constructor runs once, as promptfoo's at load)."""
        from factcli.scripting.node import JSError, NodeWorkerError, get_worker

        try:
            get_worker().call_sync("providerLoad", self._request(), timeout=60)
        except JSError as exc:
            return [f"{self._shown()} does not load: {exc.name}: {exc.js_message}" if exc.phase == "load"
                    and not exc.js_message.startswith(self._shown()) else exc.js_message]
        except NodeWorkerError as exc:
            return [str(exc)]
        return []

    async def call(self, request: CallRequest) -> ProviderResponse:
        prompt = request.prompt
        from factcli.scripting.node import JSError, NodeTimeout, NodeWorkerError, get_worker, js_value

        variables = prompt.vars or {}
        raw = prompt.template if prompt.template is not None else prompt.text
        payload = {**self._request(), "prompt": prompt.text, "callOptions": {},
                   "context": {"vars": variables,
                               "prompt": {"raw": raw, "label": prompt.label, "config": dict(prompt.config),
                                          "template": raw},
                               "evaluationId": variables.get("__evalId"),
                               "repeatIndex": variables.get("__repeatIndex", 0)}}
        limit = request.timeout_s
        try:
            # just inside run/calling/caller.py's own limit, so that the worker, not the caller, gives up first and
            # a worker stuck in a loop is restarted
            answer = await get_worker().call("provider", payload,
                                             timeout=max(limit - 0.05, 0.001) if limit else None)
        except NodeTimeout:
            raise ProviderCallError(f"{self._shown()}: callApi timed out after {limit:g} s", TIMEOUT) from None
        except JSError as exc:
            if exc.phase == "call":
                raise ProviderCallError(f"{self._shown()}: callApi threw {exc.stack}", ERROR) from None
            raise ProviderCallError(exc.js_message if exc.js_message.startswith(self._shown())
                                    else f"{self._shown()}: {exc.name}: {exc.js_message}", ERROR) from None
        except NodeWorkerError as exc:
            raise ProviderCallError(str(exc), ERROR) from None
        result = None if answer.get("undefined") else js_value(answer)
        if not isinstance(result, dict):
            shown = "undefined" if answer.get("undefined") else json.dumps(result, ensure_ascii=False)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            raise ProviderCallError(f"{self._shown()}: callApi must return an object such as {{output: ...}} (or "
                                    f"{{error: ...}}), got {shown}", ERROR)
        return response_from_dict(result)


@register_provider(lambda pid: pid.startswith("python:") or (pid.startswith("file://") and ".py" in pid))
class PythonProvider(Provider):
    cacheable = False  # user code may be stateful or read files; never serve it stale
    takes_schema = False  # it is never sent a response_format
    # a budget counts it $0 (it runs here); the row's cost is what it reports, as in promptfoo
    local = True
    user_code = True

    @staticmethod
    def validate(spec, base_dir) -> None:
        path, _ = _python_target(spec.id, base_dir)
        if path.suffix != ".py":
            raise ConfigError(f"'{spec.id}': a python provider must point at a .py file")
        if not path.is_file():
            raise ConfigError(f"python provider file not found: {path}")

    def preflight(self) -> list[str]:
        path, func_name = _python_target(self.id, self.base_dir)
        try:
            module = load_module(path)
        except Exception as exc:  # the user's module failed to import
            return [f"{path} does not import: {type(exc).__name__}: {exc}"]
        if not callable(getattr(module, func_name, None)):
            return [f"{path} has no function '{func_name}'"]
        return []

    async def call(self, request: CallRequest) -> ProviderResponse:
        prompt = request.prompt
        path, func_name = _python_target(self.id, self.base_dir)
        try:
            module = load_module(path)
        except Exception as exc:  # the user's module failed to import
            raise ProviderCallError(f"{path}: import failed: {type(exc).__name__}: {exc}", ERROR) from None
        fn = getattr(module, func_name, None)
        if fn is None:
            raise ProviderCallError(f"{path}: no function '{func_name}'", ERROR)
        options = {"id": self.id, "config": dict(self.config)}
        ctx = {"vars": dict(prompt.vars), "prompt": {"raw": prompt.text, "label": prompt.label}}
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(prompt.text, options, ctx)
            else:
                result = await asyncio.to_thread(fn, prompt.text, options, ctx)
        except Exception as exc:
            raise ProviderCallError(f"{path}:{func_name} raised {type(exc).__name__}: {exc}", ERROR) from None
        if not isinstance(result, dict):  # promptfoo refuses it too: a bare value is likely a mistake
            shown = repr(result)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            raise ProviderCallError(f"{path}:{func_name} must return a dict such as {{\"output\": ...}} (or "
                                    f"{{\"error\": ...}}), got {type(result).__name__} {shown}", ERROR)
        return response_from_dict(result)


@register_provider(callables.PREFIX)
class FunctionProvider(Provider):
    """A Python function given to factcli.evaluate() as a provider or a grader: promptfoo's Python
    provider contract, fn(prompt, options, context) -> {"output": ...} (or the output as text)."""

    cacheable = False  # user code may be stateful; never serve it stale
    takes_schema = False
    free = True  # what it spends, it reports itself (`cost` in its dict)
    user_code = True

    @staticmethod
    def validate(spec, base_dir) -> None:
        name = spec.id[len(callables.PREFIX) + 1:]
        if callables.lookup(name) is None:
            raise ConfigError(callables.missing(name))

    async def call(self, request: CallRequest) -> ProviderResponse:
        prompt = request.prompt
        name = self.id[len(callables.PREFIX) + 1:]
        fn = callables.lookup(name)
        if fn is None:
            raise ProviderCallError(callables.missing(name), ERROR)
        options = {"id": self.id, "label": self.label, "config": dict(self.config)}
        ctx = {"vars": dict(prompt.vars), "prompt": {"raw": prompt.text, "label": prompt.label}}
        try:
            result = await callables.call(fn, prompt.text, options, ctx)
        except Exception as exc:
            raise ProviderCallError(f"{name} raised {type(exc).__name__}: {exc}", ERROR) from None
        if isinstance(result, str):
            return ProviderResponse(output=result)
        if not isinstance(result, dict):
            shown = repr(result)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            raise ProviderCallError(f"{name} must return the output as text or a dict such as {{\"output\": ...}}, "
                                    f"got {type(result).__name__} {shown}", ERROR)
        return response_from_dict(result)


@register_provider("exec")
class ExecProvider(Provider):
    """`exec: cmd args`: runs the command with the prompt, options JSON and context JSON appended."""

    cacheable = False
    takes_schema = False
    # a budget counts it $0 (it runs here); the row's cost is what it reports, as in promptfoo
    local = True
    user_code = True

    @staticmethod
    def validate(spec, base_dir) -> None:
        if not spec.id[len("exec:"):].strip():
            raise ConfigError("'exec:' needs a command, e.g. 'exec: python answer.py'")

    async def call(self, request: CallRequest) -> ProviderResponse:
        prompt = request.prompt
        argv = shlex.split(self.id[len("exec:"):].strip())
        options = json.dumps({"id": self.id, "config": self.config})
        ctx = json.dumps({"vars": prompt.vars})
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, prompt.text, options, ctx, cwd=str(self.base_dir),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise ProviderCallError(f"exec provider: cannot run {argv[0]!r}: {exc}", ERROR) from None
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise ProviderCallError(
                f"exec provider: {argv[0]} exited with {proc.returncode}: {err.decode(errors='replace').strip()[:500]}",
                ERROR)
        return ProviderResponse(output=out.decode(errors="replace").strip())
