"""`nunjucksFilters:`: a config's custom template filters, made into Python callables and
registered with `templating.set_filters` for the run.

promptfoo's form is `nunjucksFilters: {name: path/to/filter.js}`, the module's default export being
the filter, called as filter(value, ...args). factcli also takes a `file://` prefix, a named export
(`filters.js:shout`), a glob (its last match wins, as in promptfoo) and Python:
`file://filters.py:shout` (without `:fn`, the function named like the filter). Filters work in
prompts, var values and assertion values (promptfoo: not in assertion values).

Every problem is a one-line ConfigError naming `nunjucksFilters.<name>`, before any model call:
a file that is missing or TypeScript, a Python module that does not import or lacks the function,
a JavaScript module that does not load or export a function, JavaScript without Node.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from factcli import sources, templating
from factcli.config.context import Ctx, expect
from factcli.config.prompts import JS_SUFFIXES, PY_SUFFIXES, TS_SUFFIXES, typescript_error
from factcli.errors import ConfigError, did_you_mean

_NAME = re.compile(r"[A-Za-z_]\w*")


def register_filters(value: Any, ctx: Ctx) -> None:
    """Parse `nunjucksFilters` (None: no custom filters) and make them the run's filters."""
    templating.set_filters(parse_filters(value, ctx) if value is not None else {})


def parse_filters(value: Any, ctx: Ctx) -> dict[str, Callable]:
    expect(isinstance(value, dict), "expected a mapping of filter name -> file (name: ./filter.js)",
           ctx.file, "nunjucksFilters")
    out: dict[str, Callable] = {}
    for name, ref in value.items():
        where = f"nunjucksFilters.{name}"
        expect(isinstance(name, str) and bool(_NAME.fullmatch(name)),
               "a filter name must be a name usable in a template (letters, digits, _)", ctx.file, where)
        expect(isinstance(ref, str) and bool(ref.strip()),
               "expected the path of a .js or .py file that defines the filter", ctx.file, where)
        out[name] = _filter(name, ref.strip(), ctx, where)
    return out


def _filter(name: str, ref: str, ctx: Ctx, where: str) -> Callable:
    path, func = sources.ref_path(ref if ref.startswith("file://") else "file://" + ref, ctx.base)
    if sources.is_glob(str(path)):
        path = sources.expand_glob(path, ctx.file, where)[-1]
    suffix = path.suffix.lower()
    if suffix in TS_SUFFIXES:
        raise ConfigError(typescript_error(path), ctx.file, where)
    if suffix not in PY_SUFFIXES + JS_SUFFIXES:
        raise ConfigError(f"a filter must be a .js or .py file, got '{path.name}'", ctx.file, where)
    if not sources.is_file(path):
        raise ConfigError(f"filter file not found: {path}", ctx.file, where)
    if suffix in PY_SUFFIXES:
        return _python_filter(path, func or name, ctx.file, where, named=func is not None)
    return _js_filter(path, func, ctx.file, where)


def _python_filter(path: Path, func: str, file: str, where: str, named: bool = True) -> Callable:
    from factcli.scripting.python import load_module

    try:
        module = load_module(path)
    except Exception as exc:  # noqa: BLE001 - the user's module failed to import: say so now, not on every row
        raise ConfigError(f"{path.name} does not import: {type(exc).__name__}: {exc}", file, where) from None
    owner, _, attr = func.partition(".")
    target = getattr(module, owner, None)
    if attr and target is not None:
        target = getattr(target, attr, None)
    if not callable(target):
        names = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")]
        hint = did_you_mean(func, names) or ("" if named else f" (name one: file://{path.name}:fn)")
        raise ConfigError(f"{path.name} has no function '{func}'{hint}", file, where)
    return target


# The worker's `call` op picks the function this way too: a named export, else the module itself or
# its default export. The probe imports the module (once: the worker's later imports reuse it) and
# reports what it found, so a wrong file fails at load and not on every row.
_PROBE = ("import({url}).then((ns) => {{ const d = ns.default; "
          "const m = d !== undefined ? (d && d.default !== undefined ? d.default : d) : ns; "
          "const fn = {fn}; const t = fn ? (m != null && m[fn] !== undefined ? m[fn] : ns[fn]) "
          ": (typeof m === 'function' ? m : m && (m.default || m.func)); return typeof t; }})")


def _js_filter(path: Path, func: str | None, file: str, where: str) -> Callable:
    from factcli.scripting.node import JSError, NodeNotFound, NodeWorkerError, get_worker, require_node

    try:
        require_node("JavaScript nunjucksFilters", "a Python filter (file://filters.py:fn)")
    except NodeNotFound as exc:
        raise ConfigError(str(exc), file, where) from None
    resolved = path.resolve()
    code = _PROBE.format(url=json.dumps(resolved.as_uri()), fn=json.dumps(func))
    try:
        answer = get_worker().call_sync("transform", {"code": code, "input": None, "context": {}}, timeout=30)
    except JSError as exc:
        raise ConfigError(f"{path.name} does not load: {exc.name}: {exc.js_message}", file, where) from None
    except NodeWorkerError as exc:
        raise ConfigError(f"cannot check {path.name}: {exc}", file, where) from None
    if answer.get("value") != "function":
        wanted = f'a function named "{func}"' if func else "a function (module.exports = fn or export default fn)"
        raise ConfigError(f"{path.name} does not export {wanted}", file, where)

    def call_js(value: Any, *args: Any, **kwargs: Any) -> Any:
        from factcli.scripting.node import js_value

        if kwargs:  # Nunjucks passes keyword arguments as a last object
            args = (*args, {**kwargs, "__keywords": True})
        answer = get_worker().call_sync("call", {"file": str(resolved), "fn": func, "args": [value, *args]})
        return None if answer.get("undefined") else js_value(answer)

    return call_js
