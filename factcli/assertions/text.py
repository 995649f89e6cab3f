"""String assertions: equals, contains family, starts-with, regex. Reasons match promptfoo's."""

from __future__ import annotations

import json
import re

from factcli import templating
from factcli.scoring.registry import AssertionContext, AssertionError_, assertion, check_assertion


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


def _scalar_value(v, name: str) -> str:
    if isinstance(v, bool) or not (isinstance(v, str) and v != "" or isinstance(v, (int, float))):
        raise AssertionError_(f'"{name}" assertion type must have a string or number value')
    return _js(v)


def _list_value(v, name: str) -> list:
    if not v:
        raise AssertionError_(f'"{name}" assertion type must have a value')
    if isinstance(v, str):
        v = split_commas(v)
    if not isinstance(v, list):
        raise AssertionError_(f'"{name}" assertion type must have an array value')
    return v


# Each type below is its rule (registry.check_assertion): (assertion, value) -> (test of the output
# text, the failure's reason or a function of the output text giving it). What depends on the value
# alone is worked out here, once for a value the scorer reuses.


@check_assertion("equals", needs_value=True)
def equals(a, v):
    if isinstance(v, (dict, list)):
        def test(out: str) -> bool:
            try:
                return json.loads(out) == v
            except ValueError:
                return False

        shown = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    else:
        shown = _js(v)
        test = shown.__eq__  # (the output text is a str)
    return test, lambda out: f'Expected output "{out}" to {{not}}equal "{shown}"'


@check_assertion("contains", needs_value=True)
def contains(a, value):
    v = _scalar_value(value, "contains")
    return (lambda out: v in out), f'Expected output to {{not}}contain "{v}"'


@check_assertion("icontains", needs_value=True)
def icontains(a, value):
    v = _scalar_value(value, "icontains")
    folded = v.lower()
    return (lambda out: folded in out.lower()), f'Expected output to {{not}}contain "{v}"'


def _any(value, name: str, fold: bool):
    values = _list_value(value, name)
    needles = [_js(x).lower() if fold else _js(x) for x in values]
    joined = ", ".join(_js(x) for x in values)

    def test(out: str) -> bool:
        out = out.lower() if fold else out
        return any(n in out for n in needles)

    return test, f'Expected output to {{not}}contain one of "{joined}"'


def _all(value, name: str, fold: bool):
    values = _list_value(value, name)
    needles = [(_js(x), _js(x).lower() if fold else _js(x)) for x in values]
    joined = ", ".join(_js(x) for x in values)

    def missing(out: str) -> list:
        out = out.lower() if fold else out
        return [shown for shown, n in needles if n not in out]

    return ((lambda out: not missing(out)),
            lambda out: f"Expected output to {{not}}contain all of [{joined}]. Missing: [{', '.join(missing(out))}]")


@check_assertion("contains-any", needs_value=True)
def contains_any(a, value):
    return _any(value, "contains-any", False)


@check_assertion("icontains-any", needs_value=True)
def icontains_any(a, value):
    return _any(value, "icontains-any", True)


@check_assertion("contains-all", needs_value=True)
def contains_all(a, value):
    return _all(value, "contains-all", False)


@check_assertion("icontains-all", needs_value=True)
def icontains_all(a, value):
    return _all(value, "icontains-all", True)


@check_assertion("starts-with", needs_value=True)
def starts_with(a, v):
    if not v or not isinstance(v, str):
        raise AssertionError_('"starts-with" assertion type must have a string value')
    return (lambda out: out.startswith(v)), f'Expected output to {{not}}start with "{v}"'


def _regex_rule(a, v):
    if not v or not isinstance(v, str):
        raise AssertionError_('"regex" assertion type must have a string value')
    search = re.compile(v).search  # re.error: the handler's result, which is not a check's
    return (lambda out: search(out) is not None), f'Expected output to {{not}}match regex "{v}"'


@assertion("regex", needs_value=True, check=_regex_rule)
def regex(ctx: AssertionContext):
    try:
        test, reason = _regex_rule(ctx.assertion, ctx.value)
    except re.error as exc:
        from factcli.types import GradingResult

        return GradingResult(False, 0.0, f"Invalid regex pattern: {exc}", ctx.assertion)
    return ctx.result(test(ctx.output_text), reason)
