"""Nunjucks' built-in filters and tests where Jinja2's differ, plus promptfoo's `load`.

Checked against Nunjucks 3.2.4 (promptfoo 0.121.20's engine) and the reference runs in
promptfoo-features.md §1.6. Filters Jinja2 already does the Nunjucks way are kept as they are:
`first`, `last`, `random`, `urlize` (and Jinja2's extras that Nunjucks lacks: `min`, `max`,
`unique`, `map`, `items`, `attr`, `format`, `tojson`, `wordwrap`, ...). Where Nunjucks would throw
a JavaScript TypeError on an undefined value (`missing | trim`, `missing | join`), these return
empty instead (docs/promptfoo-departures.md).
"""

from __future__ import annotations

import math
import re
from functools import cmp_to_key
from typing import Any
from urllib.parse import quote

from jinja2 import Undefined, pass_environment

from factcli.templating import jsvalues as js

_UNDEF = object()  # an argument that was not given (JavaScript's undefined)


def _normalize(value: Any, default: Any = "") -> Any:
    """Nunjucks' normalize(): null, undefined and false become the default."""
    if js.is_nullish(value) or value is False:
        return default
    return value


def _text(value: Any) -> str:
    return js.js_string(_normalize(value))


def _seq(value: Any) -> list:
    """An array-like value as a list ([] for undefined, objects and numbers)."""
    if isinstance(value, str):
        return list(value)
    if js.is_array(value):
        return list(value)
    if value is None or js.is_undefined(value) or isinstance(value, (dict, bool, int, float)):
        return []
    try:
        return list(value)
    except TypeError:
        return []


def _member(item: Any, attr: Any) -> Any:
    """item[attr] for a dotted attribute path, undefined (None) when absent."""
    for part in str(attr).split("."):
        if isinstance(item, dict):
            item = item.get(part, item.get(int(part)) if part.isdigit() else None)
        elif isinstance(item, (list, tuple, str)) and part.isdigit():
            item = item[int(part)] if int(part) < len(item) else None
        else:
            return None
    return item


def _js_sort_key(case_sensitive: bool):
    def cmp(a: Any, b: Any) -> int:
        if not case_sensitive and isinstance(a, str) and isinstance(b, str):
            a, b = a.lower(), b.lower()
        if js.less_than(a, b):
            return -1
        if js.less_than(b, a):
            return 1
        return 0

    return cmp_to_key(cmp)


def f_abs(value: Any) -> Any:
    n = js.to_number(value)
    return abs(n)


def f_batch(value: Any, linecount: Any, fill_with: Any = None) -> list:
    items, size = _seq(value), int(js.to_number(linecount))
    if size <= 0:
        raise ValueError("batch: the line count must be a positive number")
    out = [items[i:i + size] for i in range(0, len(items), size)]
    if out and js.truthy(fill_with) and len(out[-1]) < size:
        js.check_text_size(size - len(out[-1]), "batch")
        out[-1] = out[-1] + [fill_with] * (size - len(out[-1]))
    return out


def f_capitalize(value: Any) -> str:
    s = _text(value).lower()
    return s[:1].upper() + s[1:]


def f_center(value: Any, width: Any = 80) -> str:
    s = _text(value)
    width = int(js.to_number(width)) or 80
    if len(s) >= width:
        return s
    js.check_text_size(width - len(s), "center")
    spaces = width - len(s)
    pre = math.ceil(spaces / 2 - spaces % 2)  # lib.repeat(' ', n) repeats ceil(n) times
    post = math.ceil(spaces / 2)
    return " " * pre + s + " " * post


def f_default(value: Any, default: Any = "", boolean: Any = False) -> Any:
    if js.truthy(boolean):
        return value if js.truthy(value) else default
    return default if js.is_undefined(value) else value


def f_dictsort(value: Any, case_sensitive: Any = False, by: str = "key", reverse: bool = False) -> list:
    if not isinstance(value, dict):
        raise TypeError("dictsort filter: val must be an object")
    if by not in ("key", "value"):
        raise ValueError("dictsort filter: You can only sort by either key or value")
    pos = 0 if by == "key" else 1
    pairs = [[k, value[k]] for k in js.js_keys(value)]
    key = _js_sort_key(js.truthy(case_sensitive))
    return sorted(pairs, key=lambda p: key(p[pos]), reverse=bool(reverse))


def f_dump(value: Any, indent: Any = None) -> str:
    return js.dump(value, indent)


def _html_escape(s: str) -> str:
    return (s.replace("&", "&amp;").replace('"', "&quot;").replace("'", "&#39;")
            .replace("<", "&lt;").replace(">", "&gt;"))


def f_escape(value: Any) -> str:
    return "" if js.is_nullish(value) else _html_escape(js.js_string(value))


def f_safe(value: Any) -> str:
    return "" if js.is_nullish(value) else js.js_string(value)


def f_float(value: Any, default: Any = _UNDEF) -> Any:
    n = js.parse_float(value)
    return n if not js.isnan(n) else (Undefined() if default is _UNDEF else default)


def f_groupby(value: Any, attribute: Any) -> dict:
    """An object keyed by group (lodash's groupBy), not Jinja2's list of (grouper, items)."""
    out: dict[str, list] = {}
    for item in _seq(value):
        key = _member(item, attribute)
        out.setdefault("undefined" if key is None else js.js_string(key), []).append(item)
    return out


def f_indent(value: Any, width: Any = 4, indentfirst: Any = False, first: Any = None, blank: Any = None) -> str:
    s = _text(value)
    if s == "":
        return ""
    pad = " " * (int(js.to_number(width)) or 4) if not isinstance(width, str) else width
    first_too = js.truthy(indentfirst) or js.truthy(first)
    js.check_text_size(len(pad) * (s.count("\n") + 1), "indent")
    return "\n".join(line if i == 0 and not first_too else pad + line for i, line in enumerate(s.split("\n")))


def f_int(value: Any, default: Any = _UNDEF, base: Any = 10) -> Any:
    n = js.parse_int(value, base)
    return n if not js.isnan(n) else (Undefined() if default is _UNDEF else default)


def f_join(value: Any, d: Any = "", attribute: Any = None) -> str:
    items = _seq(value)
    if attribute is not None and not js.is_undefined(attribute):
        items = [_member(v, attribute) for v in items]
    sep = js.js_string(d) if js.truthy(d) else ""
    return sep.join(js.js_string(v) for v in items)


def f_length(value: Any) -> Any:
    value = _normalize(value)
    if isinstance(value, dict):
        return len(value)
    if isinstance(value, (str, list, tuple, range)):
        return len(value)
    return Undefined()


def f_list(value: Any) -> list:
    if isinstance(value, str):
        return list(value)
    if isinstance(value, dict):
        return [{"key": k, "value": value[k]} for k in js.js_keys(value)]
    if js.is_array(value):
        return list(value)
    if js.is_undefined(value):
        return []
    if not isinstance(value, (bool, int, float)) and value is not None:
        try:
            return list(value)  # Python iterables: dict.items(), generators
        except TypeError:
            pass
    raise ValueError("list filter: type not iterable")


def f_lower(value: Any) -> str:
    return _text(value).lower()


def f_upper(value: Any) -> str:
    return _text(value).upper()


def f_nl2br(value: Any) -> str:
    if js.is_nullish(value):
        return ""
    return re.sub(r"\r\n|\n", "<br />\n", js.js_string(value))


@pass_environment
def f_select(env, value: Any, test_name: str = "truthy", *args: Any) -> list:
    test = env.tests[test_name]
    return [item for item in _seq(value) if test(item, *args[:1])]


@pass_environment
def f_reject(env, value: Any, test_name: str = "truthy", *args: Any) -> list:
    test = env.tests[test_name]
    return [item for item in _seq(value) if not test(item, *args[:1])]


@pass_environment
def f_selectattr(env, value: Any, attribute: str, test_name: Any = _UNDEF, *args: Any) -> list:
    if test_name is _UNDEF:
        return [item for item in _seq(value) if js.truthy(_member(item, attribute))]
    test = env.tests[test_name]
    return [item for item in _seq(value) if test(_member(item, attribute), *args)]


@pass_environment
def f_rejectattr(env, value: Any, attribute: str, test_name: Any = _UNDEF, *args: Any) -> list:
    if test_name is _UNDEF:
        return [item for item in _seq(value) if not js.truthy(_member(item, attribute))]
    test = env.tests[test_name]
    return [item for item in _seq(value) if not test(_member(item, attribute), *args)]


def f_replace(value: Any, old: Any, new: Any, count: Any = None) -> Any:
    if js.is_number(old):
        old = js.js_string(old)
    elif not isinstance(old, str):
        return value
    if js.is_number(value):
        value = js.js_string(value)
    elif not isinstance(value, str):
        return value
    new = js.js_string(new)
    if old == "":
        js.check_text_size(len(new) * (len(value) + 1), "replace")
        return new + new.join(value) + new
    limit = -1 if count is None or js.is_undefined(count) else int(js.to_number(count))
    if len(new) > len(old):
        found = value.count(old) if limit < 0 else min(limit, value.count(old))
        js.check_text_size(found * (len(new) - len(old)), "replace")
    return value.replace(old, new, limit if limit >= 0 else -1)


def f_reverse(value: Any) -> Any:
    if isinstance(value, str):
        return value[::-1]
    return list(reversed(_seq(value)))


def f_round(value: Any, precision: Any = 0, method: str = "common") -> Any:
    x = js.to_number(value)
    factor = math.pow(10, js.to_number(precision) or 0)
    scaled = x * factor
    if js.isnan(scaled) or scaled in (math.inf, -math.inf):
        return scaled
    if method == "ceil":
        r = math.ceil(scaled)
    elif method == "floor":
        r = math.floor(scaled)
    else:  # Math.round: halves go up, toward +Infinity
        r = math.floor(scaled)
        if scaled - r >= 0.5:
            r += 1
    return js.binop("/", r, factor)


def f_slice(value: Any, slices: Any, fill_with: Any = None) -> list:
    items, n = _seq(value), int(js.to_number(slices))
    if n <= 0:
        raise ValueError("slice: the number of slices must be positive")
    size, extra = divmod(len(items), n)
    out, offset = [], 0
    for i in range(n):
        start = offset + i * size
        if i < extra:
            offset += 1
        part = items[start:offset + (i + 1) * size]
        if js.truthy(fill_with) and i >= extra:
            part.append(fill_with)
        out.append(part)
    return out


def f_sort(value: Any, reverse: Any = False, case_sensitive: Any = False, attribute: Any = None) -> list:
    key = _js_sort_key(js.truthy(case_sensitive))
    items = _seq(value)
    if attribute is not None and not js.is_undefined(attribute):
        return sorted(items, key=lambda v: key(_member(v, attribute)), reverse=js.truthy(reverse))
    return sorted(items, key=key, reverse=js.truthy(reverse))


def f_string(value: Any) -> str:
    return js.js_string(value)


_TAGS = re.compile(r"</?([a-z][a-z0-9]*)\b[^>]*>|<!--[\s\S]*?-->", re.IGNORECASE)


def f_striptags(value: Any, preserve_linebreaks: Any = False) -> str:
    s = _TAGS.sub("", _text(value)).strip()
    if js.truthy(preserve_linebreaks):
        s = re.sub(r"^ +| +$", "", s, flags=re.MULTILINE)
        s = re.sub(r" +", " ", s).replace("\r\n", "\n")
        return re.sub(r"\n\n\n+", "\n\n", s)
    return re.sub(r"\s+", " ", s)


def f_sum(value: Any, attribute: Any = None, start: Any = 0) -> Any:
    items = _seq(value)
    if attribute is not None and not js.is_undefined(attribute):
        items = [_member(v, attribute) for v in items]
    total: Any = 0
    for item in items:
        total = js.binop("+", total, item)
    return js.binop("+", start, total)


def f_title(value: Any) -> str:
    return " ".join(f_capitalize(word) for word in _text(value).split(" "))


def f_trim(value: Any) -> str:
    return _text(value).strip()


def f_truncate(value: Any, length: Any = 255, killwords: Any = False, end: Any = "...", leeway: Any = None) -> str:
    s = _text(value)
    length = int(js.to_number(length)) or 255
    if len(s) <= length:
        return s
    if js.truthy(killwords):
        s = s[:length]
    else:
        idx = s.rfind(" ", 0, length + 1)
        s = s[:idx if idx != -1 else length]
    return s + ("..." if js.is_nullish(end) else js.js_string(end))


def _uri_component(value: Any) -> str:
    return quote(js.js_string(value), safe="-_.!~*'()")


def f_urlencode(value: Any) -> str:
    if isinstance(value, str):
        return _uri_component(value)
    pairs = value if js.is_array(value) else ([(k, value[k]) for k in js.js_keys(value)]
                                               if isinstance(value, dict) else [])
    out = []
    for pair in pairs:
        k = pair[0] if js.is_array(pair) and len(pair) > 0 else None
        v = pair[1] if js.is_array(pair) and len(pair) > 1 else None
        out.append(f"{_uri_component(k)}={_uri_component(v)}")
    return "&".join(out)


def f_wordcount(value: Any) -> Any:
    s = _text(value)
    words = re.findall(r"[A-Za-z0-9_]+", s) if s else []
    return len(words) if words else None


def f_load(value: Any) -> Any:
    """promptfoo's `load`: JSON.parse of the value, for JSON text that arrives in a string var."""
    if js.is_undefined(value):
        return value
    try:
        return js.json_parse(js.js_string(value))
    except ValueError as exc:
        raise ValueError(f"load: {exc}") from None


FILTERS = {
    "abs": f_abs, "batch": f_batch, "capitalize": f_capitalize, "center": f_center,
    "default": f_default, "d": f_default, "dictsort": f_dictsort, "dump": f_dump, "json": f_dump,
    "escape": f_escape, "e": f_escape, "forceescape": f_escape, "safe": f_safe, "float": f_float,
    "groupby": f_groupby, "indent": f_indent, "int": f_int, "join": f_join, "length": f_length,
    "count": f_length, "list": f_list, "lower": f_lower, "upper": f_upper, "nl2br": f_nl2br,
    "select": f_select, "reject": f_reject, "selectattr": f_selectattr, "rejectattr": f_rejectattr,
    "replace": f_replace, "reverse": f_reverse, "round": f_round, "slice": f_slice, "sort": f_sort,
    "string": f_string, "striptags": f_striptags, "sum": f_sum, "title": f_title, "trim": f_trim,
    "truncate": f_truncate, "urlencode": f_urlencode, "wordcount": f_wordcount, "load": f_load,
}


# ---------------------------------------------------------------- tests (`x is odd`)


def _remainder(a: Any, b: Any) -> Any:
    return js.binop("%", a, b)


TESTS = {
    "defined": lambda v: not js.is_undefined(v),
    "undefined": js.is_undefined,
    "null": lambda v: v is None,
    "none": lambda v: v is None,
    "number": js.is_number,
    "string": lambda v: isinstance(v, str),
    "truthy": js.truthy,
    "falsy": lambda v: not js.truthy(v),
    "odd": lambda v: _remainder(v, 2) == 1,
    "even": lambda v: _remainder(v, 2) == 0,
    "divisibleby": lambda a, b: _remainder(a, b) == 0,
    "equalto": js.strict_eq, "eq": js.strict_eq, "sameas": js.strict_eq,
    "ne": lambda a, b: not js.strict_eq(a, b),
    "gt": lambda a, b: js.compare("gt", a, b), "greaterthan": lambda a, b: js.compare("gt", a, b),
    "ge": lambda a, b: js.compare("gteq", a, b),
    "lt": lambda a, b: js.compare("lt", a, b), "lessthan": lambda a, b: js.compare("lt", a, b),
    "le": lambda a, b: js.compare("lteq", a, b),
    "iterable": lambda v: isinstance(v, (str, list, tuple, range)),
    "mapping": lambda v: isinstance(v, dict),
}
