"""JavaScript value semantics that promptfoo's Nunjucks templates rely on, for Python values.

How a value prints (`String(x)`), what is truthy, loose `==`, `<`/`>`, `+` and the other
operators, the key order of an object, `JSON.stringify`, `parseInt`/`parseFloat` and
`Number.prototype.toFixed`. Values are the ones YAML/JSON give (None, bool, int, float, str, list,
dict) plus Jinja's Undefined, which plays JavaScript's `undefined`.

One deliberate departure (docs/promptfoo-departures.md): an object prints as compact JSON, where
JavaScript prints `[object Object]`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any



class Undefined:
    """Stands for jinja2.Undefined until templating/engine.py loads Jinja and puts it here: no value is
    a Jinja Undefined before then, and a command whose templates need no Jinja never imports it."""

# The most text one template function may add to what it was given (repeat, padStart/padEnd, center,
# indent, replace, batch's fill): past it the template fails, as `repeat` always did, instead of taking
# gigabytes (a stored `'a'.padStart(300000000)`: issue 48). docs/configuration.md says it.
MAX_TEXT = 10_000_000


def check_text_size(n: float, what: str) -> None:
    """`n`: how many characters (or items) the function would add."""
    if n > MAX_TEXT:
        raise ValueError(f"{what}: would add {int(n):,} characters, over the {MAX_TEXT:,} a template function "
                         "may add")


_INF = float("inf")
_NAN = float("nan")
_MAX_SAFE = 2 ** 53


def isnan(x: Any) -> bool:
    return isinstance(x, float) and math.isnan(x)


def is_undefined(value: Any) -> bool:
    return isinstance(value, Undefined)


def is_nullish(value: Any) -> bool:
    return value is None or isinstance(value, Undefined)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_array(value: Any) -> bool:
    return isinstance(value, (list, tuple, range))


# ---------------------------------------------------------------- printing


def js_number(x: float) -> str:
    """Number.prototype.toString(): `1.0` -> `1`, `1e-07` -> `1e-7`, huge ints lose digits as doubles."""
    if isinstance(x, int):
        if -_MAX_SAFE < x < _MAX_SAFE:
            return str(x)
        try:
            x = float(x)
        except OverflowError:
            return "Infinity" if x > 0 else "-Infinity"
    if isnan(x):
        return "NaN"
    if x in (_INF, -_INF):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    from decimal import Decimal  # here: decimal would slow every start-up, and few runs print a float

    # repr gives the shortest digits that round-trip, which is also what JavaScript prints
    digits_t, exp = Decimal(repr(abs(x))).normalize().as_tuple()[1:]
    digits = "".join(map(str, digits_t))
    k = len(digits)
    n = exp + k  # value = 0.digits × 10^n
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def js_string(value: Any) -> str:
    """How a value prints into a template (JavaScript's String(x); objects as compact JSON)."""
    if isinstance(value, str):
        return str(value)
    if value is None:
        return ""
    if isinstance(value, Undefined):
        return str(value)  # '' and, for factcli's undefined, the name is recorded
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_number(value)
    if is_array(value):
        return ",".join(js_string(v) for v in value)
    if isinstance(value, dict):
        return dump(value)
    return str(value)


def to_fixed(x: float, digits: int = 2) -> str:
    """JavaScript's Number.prototype.toFixed: ties on the exact binary value round up."""
    if isnan(x):
        return "NaN"
    if x in (_INF, -_INF):
        return "Infinity" if x > 0 else "-Infinity"
    from decimal import ROUND_HALF_UP, Decimal

    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


# ---------------------------------------------------------------- object keys and JSON


def _is_index_key(key: Any) -> int | None:
    """An array-index key (JS canonical integer 0..2^32-2) sorts first, numerically."""
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return key if 0 <= key < 2 ** 32 - 1 else None
    if isinstance(key, str) and key.isdigit() and key.isascii() and (key == "0" or key[0] != "0"):
        n = int(key)
        return n if n < 2 ** 32 - 1 else None
    return None


def js_keys(obj: dict) -> list:
    """A JavaScript object's key order: integer keys ascending, then the others as inserted."""
    indexed = []
    others = []
    for key in obj:
        n = _is_index_key(key)
        if n is None:
            others.append(key)
        else:
            indexed.append((n, key))
    if not indexed:
        return others
    indexed.sort(key=lambda t: t[0])
    return [k for _, k in indexed] + others


def _json_gap(indent: Any) -> str:
    if is_number(indent):
        return " " * max(0, min(10, int(indent)))
    if isinstance(indent, str):
        return indent[:10]
    return ""


def dump(value: Any, indent: Any = None) -> str:
    """JSON.stringify(value, null, indent): no spaces, no key sorting, non-ASCII kept,
    JavaScript number formatting; undefined gives '' (JavaScript gives undefined, which prints empty)."""
    out = _stringify(value, _json_gap(indent), "", 0)
    return "" if out is None else out


def _stringify(value: Any, gap: str, current: str, depth: int) -> str | None:
    if depth > 200:
        raise ValueError("dump: value is nested too deeply (or contains itself)")
    if isinstance(value, str):
        return json.dumps(str(value), ensure_ascii=False)
    if value is None:
        return "null"
    if isinstance(value, Undefined) or callable(value) and not isinstance(value, (dict, list, tuple)):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_number(value) if not isnan(value) and value not in (_INF, -_INF) else "null"
    inner = current + gap
    if is_array(value):
        items = [_stringify(v, gap, inner, depth + 1) or "null" for v in value]
        if not items:
            return "[]"
        if not gap:
            return "[" + ",".join(items) + "]"
        return "[\n" + inner + (",\n" + inner).join(items) + "\n" + current + "]"
    if isinstance(value, dict):
        parts = []
        for key in js_keys(value):
            item = _stringify(value[key], gap, inner, depth + 1)
            if item is not None:
                name = json.dumps(js_string(key), ensure_ascii=False)
                parts.append(name + (": " if gap else ":") + item)
        if not parts:
            return "{}"
        if not gap:
            return "{" + ",".join(parts) + "}"
        return "{\n" + inner + (",\n" + inner).join(parts) + "\n" + current + "}"
    if hasattr(value, "isoformat"):  # YAML dates; JavaScript's Date.toJSON gives an ISO string too
        return json.dumps(value.isoformat())
    return json.dumps(str(value), ensure_ascii=False)


def json_parse(text: str) -> Any:
    """JSON.parse: strict JSON (no NaN/Infinity), with JavaScript's error wording."""
    def refuse(name: str):
        raise json.JSONDecodeError(f"Unexpected token '{name[0]}'", text, 0)

    try:
        return json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as exc:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise ValueError(f'"{shown}" is not valid JSON ({exc.msg} at position {exc.pos})') from None


# ---------------------------------------------------------------- truthiness, numbers, operators


def truthy(value: Any) -> bool:
    """JavaScript's Boolean(x): [] and {} are true; 0, NaN, '', null and undefined are false."""
    if value is None or isinstance(value, Undefined):
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return not isnan(value) and value != 0
    if isinstance(value, str):
        return len(value) > 0
    return True


_NUM_RE = re.compile(r"[+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")


def to_number(value: Any) -> int | float:
    """JavaScript's Number(x)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    if value is None:
        return 0
    if isinstance(value, Undefined):
        return _NAN
    if isinstance(value, (list, tuple, range, dict)):
        return to_number(js_string(value)) if not isinstance(value, dict) else _NAN
    text = str(value).strip()
    if not text:
        return 0
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
        return int(text, 16)
    if _NUM_RE.fullmatch(text):
        return _num(float(text))
    return _NAN


def _num(x: float) -> int | float:
    """An integral double as a Python int, so results work as indices and range() bounds."""
    if isinstance(x, float) and x.is_integer() and abs(x) < _MAX_SAFE and not (x == 0 and math.copysign(1, x) < 0):
        return int(x)
    return x


def parse_float(value: Any) -> float:
    """JavaScript's parseFloat: the longest leading decimal number, else NaN."""
    m = _NUM_RE.match(js_string(value).lstrip())
    return float(m.group(0)) if m else _NAN


def parse_int(value: Any, base: Any = 10) -> int | float:
    """JavaScript's parseInt: leading digits of the given base, else NaN."""
    text = js_string(value).lstrip()
    sign = -1 if text.startswith("-") else 1
    text = text[1:] if text[:1] in "+-" else text
    base = int(to_number(base)) if base is not None and not is_undefined(base) else 10
    if base in (0, 16) and text[:2].lower() == "0x":
        text, base = text[2:], 16
    base = base or 10
    if not 2 <= base <= 36:
        return _NAN
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"[:base]
    n = 0
    while n < len(text) and text[n].lower() in digits:
        n += 1
    return sign * int(text[:n], base) if n else _NAN


def _to_primitive(value: Any) -> Any:
    """Objects and arrays become strings before `+` and comparisons, as in JavaScript."""
    if isinstance(value, (list, tuple, range, dict)):
        return js_string(value)
    return value


def loose_eq(a: Any, b: Any) -> bool:
    """JavaScript's `==`: `'42' == 42`, `null == undefined`; objects by identity."""
    if is_nullish(a) or is_nullish(b):
        return is_nullish(a) and is_nullish(b)
    obj_a, obj_b = isinstance(a, (list, tuple, dict)), isinstance(b, (list, tuple, dict))
    if obj_a and obj_b:
        return a is b
    a, b = _to_primitive(a), _to_primitive(b)
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    x, y = to_number(a), to_number(b)
    return x == y


def strict_eq(a: Any, b: Any) -> bool:
    """JavaScript's `===`."""
    if is_undefined(a) or is_undefined(b):
        return is_undefined(a) and is_undefined(b)
    if a is None or b is None:
        return a is b
    if is_number(a) and is_number(b):
        return a == b
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    if isinstance(a, (list, tuple, dict)) or isinstance(b, (list, tuple, dict)):
        return a is b
    return type(a) is type(b) and a == b


def less_than(a: Any, b: Any) -> bool | None:
    """JavaScript's abstract `a < b`; None where JavaScript gets undefined (a NaN compare)."""
    a, b = _to_primitive(a), _to_primitive(b)
    if isinstance(a, str) and isinstance(b, str):
        return a < b
    x, y = to_number(a), to_number(b)
    if isnan(x) or isnan(y):
        return None
    return x < y


def compare(op: str, a: Any, b: Any) -> bool:
    """One Jinja comparison operator with JavaScript semantics."""
    if op == "eq":
        return loose_eq(a, b)
    if op == "ne":
        return not loose_eq(a, b)
    if op == "lt":
        return less_than(a, b) is True
    if op == "gt":
        return less_than(b, a) is True
    if op == "lteq":
        return less_than(b, a) is False
    if op == "gteq":
        return less_than(a, b) is False
    if op in ("in", "notin"):
        return contains(b, a) == (op == "in")
    raise ValueError(f"unknown comparison {op}")


def contains(container: Any, item: Any) -> bool:
    """Nunjucks' `in`: a substring, an array element (===) or an object key."""
    if isinstance(container, str):
        return js_string(item) in container
    if isinstance(container, dict):
        return item in container or js_string(item) in container
    if is_array(container):
        return any(strict_eq(x, item) for x in container)
    return False


def binop(op: str, a: Any, b: Any) -> Any:
    """`+ - * / // % **` as Nunjucks compiles them to JavaScript (`//` is Math.floor(a / b))."""
    if op == "+":
        pa, pb = _to_primitive(a), _to_primitive(b)
        if isinstance(pa, str) or isinstance(pb, str):
            return js_string(pa) + js_string(pb)
        x, y = to_number(pa), to_number(pb)
        return _num(x + y) if isinstance(x + y, float) else x + y
    x, y = to_number(a), to_number(b)
    try:
        if op == "-":
            r = x - y
        elif op == "*":
            r = x * y
            r = float(x) * float(y) if isinstance(r, int) and abs(r) > _MAX_SAFE else r
        elif op == "/":
            r = _divide(x, y)
        elif op == "//":
            r = _divide(x, y)
            r = math.floor(r) if not isnan(r) and r not in (_INF, -_INF) else r
        elif op == "%":
            r = _remainder(x, y)
        elif op == "**":
            r = math.pow(x, y)
        else:
            raise ValueError(f"unknown operator {op}")
    except OverflowError:
        r = _INF
    except ValueError:
        if op == "**":
            r = _NAN
        else:
            raise
    return _num(r) if isinstance(r, float) else r


def _divide(x: float, y: float) -> float:
    if y == 0:
        if x == 0 or isnan(x):
            return _NAN
        return math.copysign(_INF, x) * math.copysign(1, y)
    return x / y


def _remainder(x: float, y: float) -> float:
    if y == 0 or isnan(x) or isnan(y) or x in (_INF, -_INF):
        return _NAN
    if y in (_INF, -_INF):
        return x
    return math.fmod(x, y)


def unop(op: str, value: Any) -> Any:
    n = to_number(value)
    return _num(-n) if op == "-" and isinstance(n, float) else (-n if op == "-" else n)


def utf16_len(text: str) -> int:
    """JavaScript's ``string.length``."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def utf16_units(text: str) -> list[int]:
    """The UTF-16 code units of ``text`` (what JavaScript indexes and compares)."""
    data = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i:i + 2], "little") for i in range(0, len(data), 2)]
