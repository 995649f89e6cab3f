"""`nunjucksFilters:`: a config's custom template filters, made into Python callables, the suite's
`templating.Filters` (in force while that suite loads, plans and runs, never in another's).

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

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from factcli import sources, templating
from factcli.config.context import Ctx, expect
from factcli.config.user_code import check_js_export, code_file, python_function

_NAME = re.compile(r"[A-Za-z_]\w*")


def suite_filters(value: Any, ctx: Ctx) -> templating.Filters:
    """Parse `nunjucksFilters` (None: no custom filters) into the suite's filters."""
    return templating.Filters(parse_filters(value, ctx) if value is not None else {})


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
    suffix = code_file(path, "a filter must be a .js or .py file", "filter file not found", ctx.file, where)
    if suffix in sources.PY_SUFFIXES:  # without :fn, the function named like the filter
        return python_function(path, func or name, ctx.file, where,
                               hint="" if func else f" (name one: file://{path.name}:fn)")
    return _js_filter(path, func, ctx.file, where)


def _js_filter(path: Path, func: str | None, file: str, where: str) -> Callable:
    from factcli.scripting.node import get_worker

    # the worker's `call` op, with no name, falls back to an object module's `func` member
    check_js_export(path, func, file, where, what="JavaScript nunjucksFilters",
                    instead="a Python filter (file://filters.py:fn)", unnamed="m.default || m.func")
    resolved = path.resolve()

    def call_js(value: Any, *args: Any, **kwargs: Any) -> Any:
        from factcli.scripting.node import js_value

        if kwargs:  # Nunjucks passes keyword arguments as a last object
            args = (*args, {**kwargs, "__keywords": True})
        answer = get_worker().call_sync("call", {"file": str(resolved), "fn": func, "args": [value, *args]})
        return None if answer.get("undefined") else js_value(answer)

    return call_js
