"""JSON output assertions, scored as promptfoo 0.121.20 scores them: is-json (the output parses as
JSON, optionally conforming to a JSON Schema) and contains-json (the output contains a JSON object,
optionally conforming), with promptfoo's lenient object extraction and js-yaml's reading of schema
strings. Schema validation itself is json_schema's (Ajv's rules and wording).

YAML. Schema strings and the lenient JSON extraction of contains-json use js-yaml's YAML 1.2 core
schema (as promptfoo does), through a PyYAML loader with core-schema resolvers; text that is valid
JSON is read by the JSON parser (same result). js-yaml also turns unquoted timestamps into Date
objects; here they stay strings. On malformed brace-delimited text the two YAML parsers disagree in
corners (`{:x}`, `{: {}}`, an anchor run into a word): js-yaml finds an object where PyYAML gives up
(about 1.5% of random brace soup in a fuzz, none in realistic output). As in promptfoo, contains-json
extracts objects only: a top-level `[…]` is not JSON to it.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

from factcli.assertions.js_semantics import is_js_space, js_truthy, jsify, json_parse, output_string
from factcli.assertions.json_schema import AjvSchema, SchemaError, compile_schema, errors_text
from factcli.scoring.registry import AssertionContext, AssertionError_, assertion
from factcli.types import GradingResult



# ---------------------------------------------------------------- YAML with js-yaml's core schema


class _CoreLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """PyYAML resolving scalars like js-yaml's YAML 1.2 core schema (no yes/no/on/off booleans,
    no sexagesimal or leading-zero octal numbers)."""


_CoreLoader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    ("tag:yaml.org,2002:float",
     r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
     "-+.0123456789"),
    ("tag:yaml.org,2002:merge", r"^<<$", "<"),
):
    _CoreLoader.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))


def _construct_core_int(loader, node):
    text = loader.construct_scalar(node)
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    if body.startswith("0o"):
        return sign * int(body[2:], 8)
    if body.startswith("0x"):
        return sign * int(body[2:], 16)
    return sign * int(body, 10)


def _construct_core_float(loader, node):
    text = loader.construct_scalar(node).lower()
    if text.endswith(".inf"):
        return -math.inf if text.startswith("-") else math.inf
    if text == ".nan":
        return math.nan
    return float(text)


_CoreLoader.add_constructor("tag:yaml.org,2002:int", _construct_core_int)
_CoreLoader.add_constructor("tag:yaml.org,2002:float", _construct_core_float)


def _load_yaml(text: str) -> Any:
    """promptfoo's loadYaml (one document; an empty one is undefined -> None here)."""
    return jsify(yaml.load(text, Loader=_CoreLoader))


# ------------------------------------------------------------ JSON extraction (contains-json)


def _escaped(line: str, index: int) -> bool:
    count = 0
    i = index - 1
    while i >= 0 and line[i] == "\\":
        count += 1
        i -= 1
    return count % 2 == 1


def _js_letter(ch: str | None) -> bool:
    # /[a-zA-Z]/.test(undefined) tests the string "undefined": true
    if ch is None:
        return True
    return ("a" <= ch <= "z") or ("A" <= ch <= "Z")


def _slash_comments_to_hash(text: str) -> str:
    """`// comment` -> `# comment` outside quotes and URLs, line by line (promptfoo's rule)."""
    out = []
    for line in text.split("\n"):
        state = "normal"
        buf: list[str] = []
        replaced = None
        i, n = 0, len(line)
        while i < n:
            ch = line[i]
            nxt = line[i + 1] if i + 1 < n else None
            prev = line[i - 1] if i > 0 else ""
            if state == "normal":
                if ch == "'" and not (prev and _js_letter(prev)):
                    state = "single"
                    buf.append(ch)
                elif ch == '"':
                    state = "double"
                    buf.append(ch)
                elif ch == "/" and nxt == "/":
                    start = 0
                    for j in range(i - 1, -1, -1):
                        if is_js_space(line[j]):
                            start = j + 1
                            break
                    if "://" in line[start:i + 2]:
                        buf.append(ch)
                    else:
                        slashes = 2
                        while i + slashes < n and line[i + slashes] == "/":
                            slashes += 1
                        replaced = "".join(buf) + "#" * (slashes // 2) + line[i + slashes:]
                        break
                else:
                    buf.append(ch)
            elif state == "single":
                buf.append(ch)
                if ch == "'" and not _escaped(line, i) and not _js_letter(nxt):
                    state = "normal"
            else:
                buf.append(ch)
                if ch == '"' and not _escaped(line, i):
                    state = "normal"
            i += 1
        out.append(replaced if replaced is not None else "".join(buf))
    return "\n".join(out)


def _lenient_object(text: str) -> Any:
    """js-yaml's load of a brace-delimited candidate: JSON first (identical result), then YAML."""
    try:
        return json_parse(text)
    except ValueError:
        pass
    return _load_yaml(text)


_MAX_JSON_LENGTH = 100000


def extract_json_objects(text: str) -> list:
    """promptfoo's extractJsonObjects: every `{…}` (brace-counted, unterminated ones auto-closed,
    `//` comments allowed) that js-yaml parses to an object."""
    from factcli.scoring.grading import extract_json_objects as scan

    def parse(candidate: str) -> Any:
        try:
            return _lenient_object(_slash_comments_to_hash(candidate))
        except Exception:  # noqa: BLE001 - any parse failure means "not JSON here"
            return None

    return scan(text, _MAX_JSON_LENGTH, parse)


def _schema_from_value(value: Any, name: str) -> AjvSchema:
    """The schema an is-json / contains-json value stands for, compiled (errors end the row)."""
    if isinstance(value, str):
        try:
            schema = _load_yaml(value)
        except yaml.YAMLError as exc:
            raise AssertionError_(f"{name} schema is not valid YAML: {exc}") from None
        if schema is None and yaml.compose(value, Loader=_CoreLoader) is None:
            raise AssertionError_("schema must be object or boolean")  # an empty document is undefined
    elif isinstance(value, (dict, list)):
        schema = value
    else:
        raise AssertionError_(f"{name} assertion must have a string or object value")
    try:
        return compile_schema(schema)
    except SchemaError as exc:
        raise AssertionError_(str(exc)) from None


def _schema_errors(compiled: AjvSchema, data: Any) -> list[dict]:
    try:
        return compiled.errors(data)
    except SchemaError as exc:
        raise AssertionError_(str(exc)) from None


# ---------------------------------------------------------------------- is-json, contains-json


@assertion("is-json")
def is_json(ctx: AssertionContext) -> GradingResult:
    text = output_string(ctx.output)
    inverse = ctx.inverse
    try:
        parsed, is_valid = json_parse(text), True
    except ValueError:
        parsed, is_valid = None, False
    passed = is_valid != inverse
    if is_valid and js_truthy(ctx.value):
        compiled = _schema_from_value(ctx.value, "is-json")
        errors = _schema_errors(compiled, parsed)
        passed = bool(errors) if inverse else not errors
        if not passed:
            reason = ("Output is JSON that conforms to the provided schema" if inverse else
                      f"JSON does not conform to the provided schema. Errors: {errors_text(errors)}")
            return ctx.verdict(False, reason)
    return ctx.verdict(passed, "Expected output to be valid JSON")


@assertion("contains-json")
def contains_json(ctx: AssertionContext) -> GradingResult:
    text = output_string(ctx.output)
    inverse = ctx.inverse
    message = "Expected output to contain valid JSON"
    objects = extract_json_objects(text)
    passed = (not objects) if inverse else bool(objects)
    if js_truthy(ctx.value):
        for obj in objects:
            compiled = _schema_from_value(ctx.value, "contains-json")
            errors = _schema_errors(compiled, obj)
            passed = bool(errors) if inverse else not errors
            if not errors:
                if inverse:
                    message = "Output contains JSON conforming to the provided schema"
                break
            message = f"JSON does not conform to the provided schema. Errors: {errors_text(errors)}"
    return ctx.verdict(passed, message)
