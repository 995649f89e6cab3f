"""JavaScript value semantics that several assertion families need in order to print, compare and
parse values exactly as promptfoo (running on V8) does: the ECMAScript whitespace set behind trim
and split, UTF-16 string lengths, how a number prints (``${x}``, ``toFixed``, ``toPrecision``) and
reads back (``Number()``), ``<=``, truthiness, fast-deep-equal, own-key order, JSON.stringify,
JSON.parse, promptfoo's coerceString and JavaScript regular-expression sources run on Python's
``re``. It registers no assertion type and imports no family, so any family may import it without
pulling in another family's dependencies.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

# JavaScript's UTF-16 strings live with the other JavaScript values (templating/jsvalues), below the
# Porter stemmer in stats that needs them too
from factcli.templating.jsvalues import utf16_units

# decimal (number printing) and factcli.templating (jinja2) are imported where they are used: the
# families that share this module without printing numbers should not pay for them at start-up.

# ------------------------------------------------------------------------- whitespace, UTF-16

# ECMAScript WhiteSpace + LineTerminator: what String.prototype.trim and /\s/ remove.
JS_WHITESPACE = ("\t\n\v\f\r \u00a0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200B))
                 + "\u2028\u2029\u202f\u205f\u3000\ufeff")
_JS_WS_RUN = re.compile("[" + re.escape(JS_WHITESPACE) + "]+")


def js_trim(text: str) -> str:
    return text.strip(JS_WHITESPACE)


def is_js_space(ch: str) -> bool:
    return ch in JS_WHITESPACE


def js_split_ws(text: str) -> list[str]:
    """``text.split(/\\s+/)``: empty strings at the ends are kept, as in JavaScript."""
    return _JS_WS_RUN.split(text)


# ------------------------------------------------------------------------------------ numbers


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def js_number(x: Any) -> str:
    """How JavaScript prints a value of a number slot (``${x}``): booleans as words, numbers as
    Number.prototype.toString (templating's, the one implementation)."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if not isinstance(x, (int, float)):
        return str(x)
    from factcli.templating.jsvalues import js_number as number_text

    return number_text(x)


def _non_finite(x: float) -> str:
    """How JavaScript prints NaN and the infinities (toFixed and toPrecision alike)."""
    if x != x:
        return "NaN"
    return "Infinity" if x > 0 else "-Infinity"


def js_to_fixed(x: float, digits: int) -> str:
    """``Number.prototype.toFixed``: the exact binary value rounded half up."""
    x = float(x)
    if not math.isfinite(x):
        return _non_finite(x)
    if abs(x) >= 1e21:
        return js_number(x)
    from decimal import ROUND_HALF_UP, Context, Decimal, localcontext

    with localcontext(Context(prec=1200, rounding=ROUND_HALF_UP)):
        out = str(Decimal(x).quantize(Decimal(1).scaleb(-digits)))
    if out.startswith("-") and float(out) == 0 and x == 0:
        out = out[1:]  # (-0).toFixed(2) is "0.00"
    return out


def js_to_precision(x: float, p: int) -> str:
    """``Number.prototype.toPrecision``."""
    x = float(x)
    if not math.isfinite(x):
        return _non_finite(x)
    if x == 0:
        return "0" if p == 1 else "0." + "0" * (p - 1)
    from decimal import ROUND_HALF_UP, Context, Decimal, localcontext

    sign = "-" if x < 0 else ""
    with localcontext(Context(prec=1200, rounding=ROUND_HALF_UP)):
        d = Decimal(abs(x))
        e = d.adjusted()
        n = d.scaleb(p - 1 - e).to_integral_value()
        if n >= 10 ** p:
            e += 1
            n = d.scaleb(p - 1 - e).to_integral_value()
    digits = str(int(n))
    if e < -6 or e >= p:
        mantissa = digits[0] + ("." + digits[1:] if p > 1 else "")
        return f"{sign}{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    if e == p - 1:
        return sign + digits
    if e >= 0:
        return sign + digits[: e + 1] + "." + digits[e + 1:]
    return sign + "0." + "0" * (-(e + 1)) + digits


_JS_NUMERIC = re.compile(
    r"[+-]?(?:Infinity|(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?))\Z|0[xX][0-9a-fA-F]+\Z"
    r"|0[oO][0-7]+\Z|0[bB][01]+\Z"
)


def js_to_number(value: Any) -> float:
    """JavaScript's ``Number(value)`` for the JSON/YAML scalars an assertion value can hold."""
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        s = js_trim(value)
        if s == "":
            return 0.0
        if not _JS_NUMERIC.match(s):
            return math.nan
        low = s.lower()
        if low.startswith("0x"):
            return float(int(s[2:], 16))
        if low.startswith("0o"):
            return float(int(s[2:], 8))
        if low.startswith("0b"):
            return float(int(s[2:], 2))
        if s.lstrip("+-") == "Infinity":
            return -math.inf if s.startswith("-") else math.inf
        return float(s)
    return math.nan


def js_le(a: Any, b: Any) -> bool:
    """``a <= b`` in JavaScript: two strings compare by code units, anything else as numbers."""
    if isinstance(a, str) and isinstance(b, str):
        return utf16_units(a) <= utf16_units(b)
    x, y = js_to_number(a), js_to_number(b)
    return x <= y  # NaN compares false, as in JavaScript


# ------------------------------------------------------------------------- values and objects


def js_truthy(x: Any) -> bool:
    if x is None or x is False or x == "":
        return False
    if is_number(x):
        return x == x and x != 0
    return True


def js_equal(a: Any, b: Any) -> bool:
    """fast-deep-equal on JSON values: 1 == 1.0, booleans are not numbers, key order is irrelevant."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) and is_number(b):
        return a == b or (a != a and b != b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(js_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(js_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


ARRAY_INDEX = re.compile(r"(?:0|[1-9][0-9]*)\Z")


def js_keys(obj: dict) -> list[str]:
    """An object's own keys in JavaScript order: array-index keys ascending, then insertion order."""
    index = [k for k in obj if ARRAY_INDEX.match(k) and int(k) < 4294967295]
    if not index:
        return list(obj)
    seen = set(index)
    return sorted(index, key=int) + [k for k in obj if k not in seen]


def _js_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    from factcli import templating

    return templating.js_string(key)


def jsify(value: Any) -> Any:
    """Data loaded from YAML as JavaScript would hold it: object keys are strings."""
    if isinstance(value, dict):
        return {_js_key(k): jsify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsify(v) for v in value]
    return value


# ------------------------------------------------------------------------------ JSON, strings


def _jsonish(value: Any) -> Any:
    """Numbers as JavaScript prints them in JSON: 1.0 is 1, NaN and infinities are null."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return int(value) if value.is_integer() and abs(value) < 1e21 else value
    if isinstance(value, dict):
        return {k: _jsonish(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonish(v) for v in value]
    return value


def js_json(value: Any, indent: int | None = None) -> str:
    """JSON.stringify(value[, null, indent])."""
    if indent:
        return json.dumps(_jsonish(value), indent=indent, ensure_ascii=False, default=str)
    return json.dumps(_jsonish(value), separators=(",", ":"), ensure_ascii=False, default=str)


def _no_constants(name: str):
    raise ValueError(f"invalid JSON constant {name}")


def json_parse(text: str) -> Any:
    """JSON.parse: no NaN/Infinity; raises ValueError on anything JSON.parse rejects."""
    try:
        return json.loads(text, parse_constant=_no_constants)
    except RecursionError:
        raise ValueError("too deeply nested") from None


# Not registry.coerce_string: that one prints 1.0 as "1.0", JSON.stringify (and promptfoo) as "1".
def output_string(output: Any) -> str:
    """promptfoo's coerceString: strings as they are, anything else JSON.stringify'd."""
    if isinstance(output, str):
        return output
    if output is None:
        return ""
    return js_json(output)


# ------------------------------------------------------------------------- regular expressions

_JS_NAMED_GROUP = re.compile(r"\(\?<(?![=!])([A-Za-z_][A-Za-z0-9_]*)>")
_JS_BACKREF = re.compile(r"\\k<([A-Za-z_][A-Za-z0-9_]*)>")


@functools.lru_cache(maxsize=512)
def js_regex(pattern: str) -> re.Pattern:
    """Compile a JavaScript regular expression source with Python's re (named groups translated)."""
    translated = _JS_BACKREF.sub(r"(?P=\1)", _JS_NAMED_GROUP.sub(r"(?P<\1>", pattern))
    return re.compile(translated)
