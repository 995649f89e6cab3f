"""String assertions: equals, contains family, starts-with, regex. Reasons match promptfoo's."""

from __future__ import annotations

import json
import re

from factcli import templating
from factcli.scoring.registry import AssertionContext, AssertionError_, assertion


def _js(value) -> str:
    return templating.js_string(value)


def split_commas(value: str) -> list[str]:
    """promptfoo's contains-any value grammar (the CSV cell grammar uses the same one).

    Unquoted fields are trimmed and empty ones skipped; a double-quoted field is kept as written
    (commas and spaces included, even when empty), with `""`, `\\"` and `\\\\` as escapes.
    """
    fields: list[str] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and (value[i].isspace() or value[i] == ","):
            i += 1
        if i >= n:
            break
        if value[i] != '"':
            start = i
            while i < n and value[i] != ",":
                i += 1
            fields.append(value[start:i].strip())
            continue
        i += 1
        field, terminated = [], False
        while i < n:
            if value[i] == "\\" and i + 1 < n and value[i + 1] in '"\\':
                field.append(value[i + 1])
                i += 2
            elif value[i] == '"' and i + 1 < n and value[i + 1] == '"':
                field.append('"')
                i += 2
            elif value[i] == '"':
                i += 1
                terminated = True
                break
            else:
                field.append(value[i])
                i += 1
        if not terminated:
            raise AssertionError_("Unterminated quoted field in contains assertion value")
        fields.append("".join(field))
        while i < n and value[i].isspace():
            i += 1
        if i < n and value[i] != ",":
            raise AssertionError_("Expected comma after quoted field in contains assertion value")
    return fields


def _scalar_value(ctx: AssertionContext, name: str) -> str:
    v = ctx.value
    if isinstance(v, bool) or not (isinstance(v, str) and v != "" or isinstance(v, (int, float))):
        raise AssertionError_(f'"{name}" assertion type must have a string or number value')
    return _js(v)


def _list_value(ctx: AssertionContext, name: str) -> list:
    v = ctx.value
    if not v:
        raise AssertionError_(f'"{name}" assertion type must have a value')
    if isinstance(v, str):
        v = split_commas(v)
    if not isinstance(v, list):
        raise AssertionError_(f'"{name}" assertion type must have an array value')
    return v


@assertion("equals", needs_value=True)
def equals(ctx: AssertionContext):
    out = ctx.output_text
    v = ctx.value
    if isinstance(v, (dict, list)):
        try:
            cond = json.loads(out) == v
        except ValueError:
            cond = False
        shown = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    else:
        cond = _js(v) == out
        shown = _js(v)
    return ctx.result(cond, f'Expected output "{out}" to {{not}}equal "{shown}"')


@assertion("contains", needs_value=True)
def contains(ctx: AssertionContext):
    v = _scalar_value(ctx, "contains")
    return ctx.result(v in ctx.output_text, f'Expected output to {{not}}contain "{v}"')


@assertion("icontains", needs_value=True)
def icontains(ctx: AssertionContext):
    v = _scalar_value(ctx, "icontains")
    return ctx.result(v.lower() in ctx.output_text.lower(), f'Expected output to {{not}}contain "{v}"')


def _any(ctx: AssertionContext, name: str, fold: bool):
    values = _list_value(ctx, name)
    out = ctx.output_text.lower() if fold else ctx.output_text
    cond = any((_js(x).lower() if fold else _js(x)) in out for x in values)
    joined = ", ".join(_js(x) for x in values)
    return ctx.result(cond, f'Expected output to {{not}}contain one of "{joined}"')


def _all(ctx: AssertionContext, name: str, fold: bool):
    values = _list_value(ctx, name)
    out = ctx.output_text.lower() if fold else ctx.output_text
    missing = [_js(x) for x in values if (_js(x).lower() if fold else _js(x)) not in out]
    joined = ", ".join(_js(x) for x in values)
    return ctx.result(not missing, f"Expected output to {{not}}contain all of [{joined}]. Missing: [{', '.join(missing)}]")


@assertion("contains-any", needs_value=True)
def contains_any(ctx):
    return _any(ctx, "contains-any", False)


@assertion("icontains-any", needs_value=True)
def icontains_any(ctx):
    return _any(ctx, "icontains-any", True)


@assertion("contains-all", needs_value=True)
def contains_all(ctx):
    return _all(ctx, "contains-all", False)


@assertion("icontains-all", needs_value=True)
def icontains_all(ctx):
    return _all(ctx, "icontains-all", True)


@assertion("starts-with", needs_value=True)
def starts_with(ctx: AssertionContext):
    v = ctx.value
    if not v or not isinstance(v, str):
        raise AssertionError_('"starts-with" assertion type must have a string value')
    return ctx.result(ctx.output_text.startswith(v), f'Expected output to {{not}}start with "{v}"')


@assertion("regex", needs_value=True)
def regex(ctx: AssertionContext):
    v = ctx.value
    if not v or not isinstance(v, str):
        raise AssertionError_('"regex" assertion type must have a string value')
    try:
        pattern = re.compile(v)
    except re.error as exc:
        from factcli.types import GradingResult

        return GradingResult(False, 0.0, f"Invalid regex pattern: {exc}", ctx.assertion)
    return ctx.result(pattern.search(ctx.output_text) is not None,
                      f'Expected output to {{not}}match regex "{v}"')
