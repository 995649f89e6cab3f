"""Structured-output assertions, scored as promptfoo 0.121.20 scores them.

is-json, contains-json, is-html, contains-html, is-sql, contains-sql, is-xml, contains-xml,
is-valid-openai-function-call (alias is-valid-function-call) and is-valid-openai-tools-call.
Pass conditions, scores and reason strings follow promptfoo's handlers; the libraries differ:

- JSON Schema (is-json, contains-json, function/tool calls). promptfoo compiles schemas with Ajv 8
  (draft-07, strict mode, ajv-formats) and reports the first error Ajv meets. Validity here is
  decided by `jsonschema` (a draft-07 validator that, like Ajv, applies keywords beside `$ref`),
  and the error text is rebuilt in Ajv's wording and Ajv's keyword order (`data/a must be
  string`, composite errors from anyOf/oneOf included). Ajv's compile-time failures are
  reproduced as row errors: a schema that fails the draft-07 meta-schema ("schema is invalid:
  …"), strict mode's unknown keywords and formats, an unsupported `$schema`, an unresolvable
  `$ref`. Known differences: regular expressions (`pattern`, `patternProperties`, the `regex`
  format) run on Python's `re` after translating JS named groups, not on JS RegExp with the `u`
  flag; the long URI/URL format regexes of ajv-formats are approximated; `formatMaximum` and
  friends are accepted but not enforced; only local (`#…`) references resolve, never remote ones.
- YAML. Schema strings and the lenient JSON extraction of contains-json use js-yaml's YAML 1.2
  core schema (as promptfoo does), through a PyYAML loader with core-schema resolvers; text that
  is valid JSON is read by the JSON parser (same result). js-yaml also turns unquoted timestamps
  into Date objects; here they stay strings. On malformed brace-delimited text the two YAML
  parsers disagree in corners (`{:x}`, `{: {}}`, an anchor run into a word): js-yaml finds an
  object where PyYAML gives up (about 1.5% of random brace soup in a fuzz, none in realistic
  output). As in promptfoo, contains-json extracts objects only: a top-level `[…]` is not JSON
  to it.
- HTML. promptfoo parses with parse5; html5lib is used here (both implement the WHATWG tree
  construction, so implied html/head/body, foster parenting and the like agree). Whether a
  html/head/body element came from a tag in the text (parse5's source location) is read off
  html5lib's tokens.
- SQL. promptfoo parses with node-sql-parser for `databaseType` (default MySQL); sqlglot with the
  matching dialect is used here, plus promptfoo's own pre-checks (unbalanced backticks, the
  "missing comma" pattern, MySQL's generate_series). The grammars differ: sqlglot accepts some
  statements node-sql-parser rejects and the other way round, a statement sqlglot can only keep
  as an opaque command is rejected, and dialects node-sql-parser has but sqlglot lacks (DB2,
  FlinkSQL, Noql) are parsed with sqlglot's generic dialect. allowedTables / allowedColumns are
  checked against node-sql-parser-style authority strings (`select::null::users`,
  `select::users::id`) built from sqlglot's tree; their order in the "Found: […]" reason, and
  node-sql-parser's quirks about which statement type a column is attributed to, are
  approximated.
- XML. is-xml's well-formedness check uses the stdlib expat parser (with namespaces, like
  promptfoo's saxes); DOCTYPE internal subsets are refused as promptfoo refuses them. Pass and
  score agree; the text after "XML parsing failed: " is expat's message, not saxes'. contains-xml
  finds candidates with promptfoo's own tag scanner; required element paths are looked up in a
  fast-xml-parser-shaped tree (`root.child`, `root.item.0`, `root.@_id`).
- Function and tool calls. promptfoo validates is-valid-openai-function-call only on provider
  classes that implement a validator; which ones do is decided here from the provider id the way
  promptfoo's classes decide it: OpenAI chat ids and the OpenAI-compatible groq:, deepseek:,
  openrouter:, xai:, togetherai:, perplexity:, fireworks:, cerebras: check the call against
  `functions`; google: and vertex: use promptfoo's Google validator (Gemini `functionCall` output
  against the `functionDeclarations` in `tools`, schemas first reduced to Gemini's subset);
  everything else (echo, scripts, anthropic:, azure:, bedrock:, ollama:, mistral:, litellm:,
  openai:responses:, …) gets "Provider does not have functionality for checking function call.".
  A provider whose config is missing crashes promptfoo's is-valid-openai-tools-call with a
  TypeError; factcli always has a config, so that is "No tools configured in provider, but output
  contains tool calls". Tool-call output is taken as the provider returned it: a JSON *string* of
  tool calls is not a tools response, in promptfoo or here. Unparseable `arguments` fail with
  Python's JSON error text, not V8's. `file://` tool or function definitions load from
  .json/.yaml files; promptfoo's `file://tools.py:fn` / `file://tools.js:fn` generators are not
  supported (the row is an error).
"""

from __future__ import annotations

import functools
import ipaddress
import json
import math
import re
from typing import Any
from urllib.parse import quote

import yaml

from factcli import templating
from factcli.scoring.registry import AssertionContext, AssertionError_, assertion
from factcli.types import GradingResult

# ------------------------------------------------------------------------------------ helpers


def _verdict(ctx: AssertionContext, passed: bool, reason: str) -> GradingResult:
    return GradingResult(passed=passed, score=1.0 if passed else 0.0,
                         reason="Assertion passed" if passed else reason, assertion=ctx.assertion)


def _js_json(value: Any) -> str:
    """JSON.stringify(value): compact, integral floats printed as integers."""
    from factcli.assertions.scripts import js_json

    return js_json(value)


def _output_string(output: Any) -> str:
    """promptfoo's coerceString: strings as they are, anything else JSON.stringify'd."""
    if isinstance(output, str):
        return output
    if output is None:
        return ""
    return _js_json(output)


def _js_num(x: Any) -> str:
    return templating.js_string(x)


_JS_SPACE = " \t\n\r\v\f\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
            "\u2028\u2029\u202f\u205f\u3000\ufeff"


def _js_trim(s: str) -> str:
    return s.strip(_JS_SPACE)


def _is_js_space(ch: str) -> bool:
    return ch in _JS_SPACE


_ARRAY_INDEX = re.compile(r"(?:0|[1-9][0-9]*)\Z")


def _js_keys(obj: dict) -> list[str]:
    """An object's own keys in JavaScript order: array-index keys ascending, then insertion order."""
    index = [k for k in obj if _ARRAY_INDEX.match(k) and int(k) < 4294967295]
    if not index:
        return list(obj)
    seen = set(index)
    return sorted(index, key=int) + [k for k in obj if k not in seen]


def _js_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    return templating.js_string(key)


def _jsify(value: Any) -> Any:
    """Data loaded from YAML as JavaScript would hold it: object keys are strings."""
    if isinstance(value, dict):
        return {_js_key(k): _jsify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsify(v) for v in value]
    return value


def _js_truthy(x: Any) -> bool:
    if x is None or x is False or x == "":
        return False
    if _is_number(x):
        return x == x and x != 0
    return True


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _js_equal(a: Any, b: Any) -> bool:
    """fast-deep-equal on JSON values: 1 == 1.0, booleans are not numbers, key order is irrelevant."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b or (a != a and b != b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_js_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_js_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


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
    return _jsify(yaml.load(text, Loader=_CoreLoader))


def _no_constants(name: str):
    raise ValueError(f"invalid JSON constant {name}")


def _json_parse(text: str) -> Any:
    """JSON.parse: no NaN/Infinity; raises ValueError on anything JSON.parse rejects."""
    try:
        return json.loads(text, parse_constant=_no_constants)
    except RecursionError:
        raise ValueError("too deeply nested") from None


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
                        if _is_js_space(line[j]):
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
        return _json_parse(text)
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


# ------------------------------------------------- JSON Schema: jsonschema validity, Ajv's words

_JS_NAMED_GROUP = re.compile(r"\(\?<(?![=!])([A-Za-z_][A-Za-z0-9_]*)>")
_JS_BACKREF = re.compile(r"\\k<([A-Za-z_][A-Za-z0-9_]*)>")


@functools.lru_cache(maxsize=512)
def _js_regex(pattern: str) -> re.Pattern:
    """Compile a JavaScript regular expression source with Python's re (named groups translated)."""
    translated = _JS_BACKREF.sub(r"(?P=\1)", _JS_NAMED_GROUP.sub(r"(?P<\1>", pattern))
    return re.compile(translated)


def _regex_ok(pattern: str) -> bool:
    if re.search(r"[^\\]\\Z", pattern):
        return False
    try:
        _js_regex(pattern)
        return True
    except (re.error, RecursionError, OverflowError):
        return False


def _string_format(check):
    def run(value):
        return not isinstance(value, str) or bool(check(value))
    return run


def _number_format(check):
    def run(value):
        return not _is_number(value) or bool(check(value))
    return run


_DAYS = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
_DATE = re.compile(r"(\d\d\d\d)-(\d\d)-(\d\d)\Z")
_TIME = re.compile(r"(\d\d):(\d\d):(\d\d(?:\.\d+)?)(z|([+-])(\d\d)(?::?(\d\d))?)?\Z", re.I)


def _is_date(s: str) -> bool:
    m = _DATE.match(s)
    if not m:
        return False
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return 1 <= month <= 12 and 1 <= day <= (29 if month == 2 and leap else _DAYS[month])


def _time_checker(strict_zone: bool):
    def is_time(s: str) -> bool:
        m = _TIME.match(s)
        if not m:
            return False
        hour, minute, second = int(m.group(1)), int(m.group(2)), float(m.group(3))
        zone = m.group(4)
        zsign = -1 if m.group(5) == "-" else 1
        zh, zm = int(m.group(6) or 0), int(m.group(7) or 0)
        if zh > 23 or zm > 59 or (strict_zone and not zone):
            return False
        if hour <= 23 and minute <= 59 and second < 60:
            return True
        utc_min = minute - zm * zsign
        utc_hour = hour - zh * zsign - (1 if utc_min < 0 else 0)
        return utc_hour in (23, -1) and utc_min in (59, -1) and second < 61
    return is_time


def _date_time_checker(strict_zone: bool):
    is_time = _time_checker(strict_zone)

    def is_date_time(s: str) -> bool:
        parts = re.split(r"t|\s", s, flags=re.I)
        return len(parts) == 2 and _is_date(parts[0]) and is_time(parts[1])
    return is_date_time


def _is_ipv6(s: str) -> bool:
    if "%" in s:
        return False
    try:
        ipaddress.IPv6Address(s)
        return True
    except ValueError:
        return False


_URI_CHARS = r"(?:[a-z0-9\-._~!$&'()*+,;=:@/?#\[\]]|%[0-9a-f]{2})"
_FORMAT_PATTERNS = {
    "duration": re.compile(r"P(?!\Z)((\d+Y)?(\d+M)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+S)?)?|(\d+W)?)\Z"),
    "uri-reference": re.compile(rf"(?:[a-z][a-z0-9+\-.]*:)?{_URI_CHARS}*\Z", re.I),
    "uri-template": re.compile(
        r"(?:(?:[^\x00-\x20\"'<>%\\^`{|}]|%[0-9a-f]{2})|\{[+#./;?&=,!@|]?(?:[a-z0-9_]|%[0-9a-f]{2})+"
        r"(?::[1-9][0-9]{0,3}|\*)?(?:,(?:[a-z0-9_]|%[0-9a-f]{2})+(?::[1-9][0-9]{0,3}|\*)?)*\})*\Z", re.I),
    "url": re.compile(r"(?:https?|ftp)://(?:\S+(?::\S*)?@)?[^\s/:?#.]+(?:\.[^\s/:?#.]+)*(?::\d{2,5})?(?:[/?#]\S*)?\Z",
                      re.I),
    "email": re.compile(r"[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@"
                        r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\Z", re.I),
    "hostname": re.compile(r"(?=.{1,253}\.?\Z)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
                           r"(?:\.[a-z0-9](?:[-0-9a-z]{0,61}[0-9a-z])?)*\.?\Z", re.I),
    "ipv4": re.compile(r"(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\Z"),
    "uuid": re.compile(r"(?:urn:uuid:)?[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}\Z", re.I),
    "json-pointer": re.compile(r"(?:/(?:[^~/]|~0|~1)*)*\Z"),
    "json-pointer-uri-fragment": re.compile(r"#(?:/(?:[a-z0-9_\-.!$&'()*+,;:=@]|%[0-9a-f]{2}|~0|~1)*)*\Z", re.I),
    "relative-json-pointer": re.compile(r"(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~0|~1)*)*)\Z"),
}
_URI = re.compile(rf"[a-z][a-z0-9+\-.]*:{_URI_CHARS}*\Z", re.I)
_BYTE = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$", re.M)

_STRING_FORMATS = {
    "date": _is_date,
    "time": _time_checker(True),
    "date-time": _date_time_checker(True),
    "iso-time": _time_checker(False),
    "iso-date-time": _date_time_checker(False),
    "uri": lambda s: bool(re.search(r"/|:", s)) and bool(_URI.match(s)),
    "ipv6": _is_ipv6,
    "regex": _regex_ok,
    "byte": lambda s: bool(_BYTE.search(s)),
    "password": lambda s: True,
    "binary": lambda s: True,
    **{name: (lambda rx: (lambda s: bool(rx.match(s))))(rx) for name, rx in _FORMAT_PATTERNS.items()},
}
_NUMBER_FORMATS = {
    "int32": lambda x: float(x).is_integer() and -(2 ** 31) <= x <= 2 ** 31 - 1,
    "int64": lambda x: float(x).is_integer(),
    "float": lambda x: True,
    "double": lambda x: True,
}
_KNOWN_FORMATS = set(_STRING_FORMATS) | set(_NUMBER_FORMATS)


@functools.lru_cache(maxsize=1)
def _validator_class():
    import jsonschema
    from jsonschema import Draft7Validator, ValidationError

    checker = jsonschema.FormatChecker(formats=())
    for name, fn in _STRING_FORMATS.items():
        checker.checks(name)(_string_format(fn))
    for name, fn in _NUMBER_FORMATS.items():
        checker.checks(name)(_number_format(fn))

    base = Draft7Validator.VALIDATORS

    def type_(validator, types, instance, schema):
        if instance is None and schema.get("nullable") is True:
            return
        yield from base["type"](validator, types, instance, schema)

    def pattern(validator, patrn, instance, schema):
        if isinstance(instance, str) and not _js_regex(patrn).search(instance):
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    validators = {**base, "type": type_, "pattern": pattern}
    cls = jsonschema.validators.create(
        meta_schema=Draft7Validator.META_SCHEMA, validators=validators,
        type_checker=Draft7Validator.TYPE_CHECKER, format_checker=checker,
        applicable_validators=lambda schema: schema.items(),  # Ajv applies keywords beside $ref
    )
    return cls, checker


# Ajv's keyword groups, in Ajv's evaluation order (draft-07 vocabularies, "before" rules applied).
_GROUPS: list[tuple[str | None, tuple[str, ...]]] = [
    (None, ("$ref", "const", "enum", "not", "anyOf", "oneOf", "allOf", "if")),
    ("number", ("maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum", "multipleOf", "format")),
    ("string", ("maxLength", "minLength", "pattern", "format")),
    ("array", ("maxItems", "minItems", "additionalItems", "items", "contains", "uniqueItems")),
    ("object", ("maxProperties", "minProperties", "required", "propertyNames", "additionalProperties",
                "dependencies", "properties", "patternProperties")),
]
_GROUP_OF_TYPE = {t: kws for t, kws in _GROUPS if t}
_KNOWN_KEYWORDS = {kw for _, kws in _GROUPS for kw in kws} | {
    "$schema", "$id", "$defs", "$vocabulary", "$comment", "definitions", "type", "nullable", "then",
    "else", "title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples",
    "contentMediaType", "contentEncoding", "contentSchema", "$async", "formatMaximum",
    "formatMinimum", "formatExclusiveMaximum", "formatExclusiveMinimum",
}
_DRAFT7_IDS = ("http://json-schema.org/draft-07/schema", "http://json-schema.org/draft-07/schema#")


def _ajv_type_ok(t: str, x: Any) -> bool:
    if t == "null":
        return x is None
    if t == "boolean":
        return isinstance(x, bool)
    if t == "string":
        return isinstance(x, str)
    if t == "array":
        return isinstance(x, list)
    if t == "object":
        return isinstance(x, dict)
    if t == "number":
        return _is_number(x) and (isinstance(x, int) or math.isfinite(x))
    if t == "integer":
        return _is_number(x) and (isinstance(x, int) or (math.isfinite(x) and x.is_integer()))
    return False


def _pointer_escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _fragment(token: Any) -> str:
    """Ajv's escapeFragment: encodeURIComponent(escapeJsonPointer(token))."""
    return quote(_pointer_escape(str(token)), safe="!'()*-._~")


def _instance_path(path: list) -> str:
    return "".join("/" + (_pointer_escape(p) if isinstance(p, str) else str(p)) for p in path)


class SchemaError(Exception):
    """Ajv refused to compile the schema (promptfoo: the assertion throws, the row is an ERROR)."""


class _Ajv:
    """One compiled schema: jsonschema decides validity, Ajv's first error is rebuilt for the text."""

    def __init__(self, root: Any):
        cls, checker = _validator_class()
        from referencing import Registry

        self.root = root
        self.validator = cls(root, format_checker=checker, registry=Registry())

    # -- validity (jsonschema) ------------------------------------------------------------
    def valid(self, schema: Any, data: Any) -> bool:
        if schema is True or (isinstance(schema, dict) and not schema):
            return True
        if schema is False:
            return False
        try:
            return self.validator.evolve(schema=schema).is_valid(data)
        except Exception as exc:  # noqa: BLE001 - e.g. an unresolvable reference at run time
            raise SchemaError(str(exc)) from None

    def resolve(self, ref: str) -> Any:
        if ref == "#" or ref == "":
            return self.root
        if not ref.startswith("#/"):
            raise SchemaError(f"can't resolve reference {ref} from id #")
        node = self.root
        for raw in ref[2:].split("/"):
            from urllib.parse import unquote

            token = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise SchemaError(f"can't resolve reference {ref} from id #")
        return node

    # -- Ajv's error list ---------------------------------------------------------------
    def errors(self, data: Any) -> list[dict]:
        if self.valid(self.root, data):
            return []
        found = self._first(self.root, data, [], "#", False, None)
        if not found:  # the two validators disagree on which keyword fails: say what jsonschema says
            from jsonschema.exceptions import best_match

            err = best_match(self.validator.iter_errors(data))
            found = [{"instancePath": _instance_path(list(err.absolute_path)),
                      "schemaPath": "#/" + "/".join(_fragment(p) for p in err.absolute_schema_path),
                      "keyword": str(err.validator), "params": {}, "message": err.message}]
        return found

    def _err(self, ip: list, sp: str, keyword: str, params: dict, message: str, pn: str | None,
             parent: bool = False) -> dict:
        err = {"instancePath": _instance_path(ip), "schemaPath": sp if parent else f"{sp}/{keyword}",
               "keyword": keyword, "params": params, "message": message}
        if pn is not None:
            err["propertyName"] = pn
        return err

    @staticmethod
    def _types(schema: dict) -> list[str]:
        t = schema.get("type")
        types = list(t) if isinstance(t, list) else ([t] if isinstance(t, str) else [])
        if schema.get("nullable") is True and "null" not in types:
            types.append("null")
        return types

    def _first(self, s: Any, d: Any, ip: list, sp: str, composite: bool, pn: str | None) -> list[dict]:
        """The errors Ajv (allErrors: false) reports for data `d` against schema `s`."""
        if s is True or (isinstance(s, dict) and not s):
            return []
        if s is False:
            return [self._err(ip, sp, "false schema", {}, "boolean schema is false", pn, parent=True)]
        if not isinstance(s, dict):
            return []
        types = self._types(s)
        upfront = bool(types) and not (
            len(types) == 1 and types[0] in _GROUP_OF_TYPE and any(k in s for k in _GROUP_OF_TYPE[types[0]]))
        type_error = self._err(ip, sp, "type", {"type": ",".join(types)}, f"must be {','.join(types)}", pn)
        errs: list[dict] = []
        if upfront and not any(_ajv_type_ok(t, d) for t in types):
            errs.append(type_error)
            if not composite:
                return errs
        for group_type, keywords in _GROUPS:
            present = [k for k in keywords if k in s]
            if not present and not (group_type is None and "type" in s):  # `type` is an untyped rule
                continue
            if group_type is None or _ajv_type_ok(group_type, d):
                for k in present:
                    found = self._keyword(k, s, d, ip, sp, composite, pn)
                    if found:
                        errs.extend(found)
                        break
            elif len(types) == 1 and types[0] == group_type and not upfront:
                errs.append(type_error)
            if errs:
                return errs
        return errs

    def _keyword(self, k: str, s: dict, d: Any, ip: list, sp: str, composite: bool,
                 pn: str | None) -> list[dict]:
        v = s[k]
        err = functools.partial(self._err, ip, sp, k, pn=pn)
        if k == "$ref":
            return self._first(self.resolve(v), d, ip, v, composite, pn)
        if k == "const":
            return [] if _js_equal(d, v) else [err({"allowedValue": v}, "must be equal to constant")]
        if k == "enum":
            ok = isinstance(v, list) and any(_js_equal(d, x) for x in v)
            return [] if ok else [err({"allowedValues": v}, "must be equal to one of the allowed values")]
        if k == "not":
            return [err({}, "must NOT be valid")] if self.valid(v, d) else []
        if k == "anyOf":
            collected = []
            for i, sub in enumerate(v):
                found = self._first(sub, d, ip, f"{sp}/anyOf/{i}", True, pn)
                if not found and self.valid(sub, d):
                    return []
                collected.extend(found)
            return collected + [err({}, "must match a schema in anyOf")]
        if k == "oneOf":
            collected, valid, passing = [], False, None
            for i, sub in enumerate(v):
                ok = self.valid(sub, d)
                if not ok:
                    collected.extend(self._first(sub, d, ip, f"{sp}/oneOf/{i}", True, pn))
                if i > 0 and ok and valid:  # a second match: Ajv stops looking
                    valid, passing = False, [passing, i]
                    break
                if ok:
                    valid, passing = True, i
            if valid:
                return []
            return collected + [err({"passingSchemas": passing}, "must match exactly one schema in oneOf")]
        if k == "allOf":
            for i, sub in enumerate(v):
                found = self._first(sub, d, ip, f"{sp}/allOf/{i}", composite, pn)
                if found:
                    return found
            return []
        if k == "if":
            clause = "then" if self.valid(v, d) else "else"
            if clause not in s:
                return []
            found = self._first(s[clause], d, ip, f"{sp}/{clause}", composite, pn)
            if found and composite:
                found = found + [err({"failingKeyword": clause}, f'must match "{clause}" schema')]
            return found
        if k in ("maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum"):
            if self.valid({k: v}, d):
                return []
            op = {"maximum": "<=", "minimum": ">=", "exclusiveMaximum": "<", "exclusiveMinimum": ">"}[k]
            return [err({"comparison": op, "limit": v}, f"must be {op} {_js_num(v)}")]
        if k == "multipleOf":
            return [] if self.valid({k: v}, d) else [err({"multipleOf": v}, f"must be multiple of {_js_num(v)}")]
        if k == "format":
            if self.valid({k: v}, d):
                return []
            return [err({"format": v}, f'must match format "{v}"')]
        if k in ("maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties"):
            if self.valid({k: v}, d):
                return []
            noun = {"L": "characters", "I": "items", "P": "properties"}[k[3]]
            more = "more" if k.startswith("max") else "fewer"
            return [err({"limit": v}, f"must NOT have {more} than {_js_num(v)} {noun}")]
        if k == "pattern":
            return [] if self.valid({k: v}, d) else [err({"pattern": v}, f'must match pattern "{v}"')]
        if k == "contains":
            if any(self.valid(v, item) for item in d):
                return []
            return [err({"minContains": 1}, "must contain at least 1 valid item(s)")]
        if k == "uniqueItems":
            pair = _duplicate_pair(d, s.get("items")) if v is True else None
            if pair is None:
                return []
            i, j = pair
            return [err({"i": i, "j": j}, f"must NOT have duplicate items (items ## {j} and {i} are identical)")]
        if k == "additionalItems":
            items = s.get("items")
            if not isinstance(items, list):
                return []
            n = len(items)
            if v is False:
                return [err({"limit": n}, f"must NOT have more than {n} items")] if len(d) > n else []
            for i in range(n, len(d)):
                found = self._first(v, d[i], ip + [i], f"{sp}/additionalItems", composite, pn)
                if found:
                    return found
            return []
        if k == "items":
            if isinstance(v, list):
                for i, sub in enumerate(v[:len(d)]):
                    found = self._first(sub, d[i], ip + [i], f"{sp}/items/{i}", composite, pn)
                    if found:
                        return found
                return []
            for i, item in enumerate(d):
                found = self._first(v, item, ip + [i], f"{sp}/items", composite, pn)
                if found:
                    return found
            return []
        if k == "required":
            for prop in v if isinstance(v, list) else []:
                if prop not in d:
                    return [err({"missingProperty": prop}, f"must have required property '{prop}'")]
            return []
        if k == "propertyNames":
            for key in _js_keys(d):
                if not self.valid(v, key):
                    found = self._first(v, key, ip, f"{sp}/propertyNames", True, key)
                    return found + [err({"propertyName": key}, "property name must be valid")]
            return []
        if k == "additionalProperties":
            props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
            patterns = list(s.get("patternProperties") or {}) if isinstance(s.get("patternProperties"), dict) else []
            extra = [key for key in _js_keys(d)
                     if key not in props and not any(_js_regex(p).search(key) for p in patterns)]
            if v is False:
                return [err({"additionalProperty": extra[0]}, "must NOT have additional properties")] if extra else []
            if isinstance(v, dict):
                for key in extra:
                    found = self._first(v, d[key], ip + [key], f"{sp}/additionalProperties", composite, pn)
                    if found:
                        return found
            return []
        if k == "dependencies":
            if not isinstance(v, dict):
                return []
            for prop in _js_keys(v):
                deps = v[prop]
                if isinstance(deps, list) and deps and prop in d:
                    missing = [x for x in deps if x not in d]
                    if missing:
                        joined = ", ".join(str(x) for x in deps)
                        word = "property" if len(deps) == 1 else "properties"
                        return [err({"property": prop, "missingProperty": missing[0], "depsCount": len(deps),
                                     "deps": joined}, f"must have {word} {joined} when property {prop} is present")]
            for prop in _js_keys(v):
                if not isinstance(v[prop], list) and prop in d:
                    found = self._first(v[prop], d, ip, f"{sp}/dependencies/{_fragment(prop)}", composite, pn)
                    if found:
                        return found
            return []
        if k == "properties":
            if not isinstance(v, dict):
                return []
            for prop in _js_keys(v):
                if prop in d:
                    found = self._first(v[prop], d[prop], ip + [prop], f"{sp}/properties/{_fragment(prop)}",
                                        composite, pn)
                    if found:
                        return found
            return []
        if k == "patternProperties":
            if not isinstance(v, dict):
                return []
            for pat in _js_keys(v):
                for key in _js_keys(d):
                    if _js_regex(pat).search(key):
                        found = self._first(v[pat], d[key], ip + [key],
                                            f"{sp}/patternProperties/{_fragment(pat)}", composite, pn)
                        if found:
                            return found
            return []
        return []

    # -- compile-time checks (Ajv strict mode) ----------------------------------------------
    def check_strict(self) -> None:
        seen: set[int] = set()
        self._strict(self.root, "#", seen)

    def _strict(self, s: Any, sp: str, seen: set[int]) -> None:
        if not isinstance(s, dict) or id(s) in seen:
            return
        seen.add(id(s))
        for key in s:
            if key not in _KNOWN_KEYWORDS:
                raise SchemaError(f'strict mode: unknown keyword: "{key}"')
        if s.get("nullable") is True and "type" not in s:
            raise SchemaError('"nullable" cannot be used without "type"')
        for clause in ("then", "else"):
            if clause in s and "if" not in s:
                raise SchemaError(f'strict mode: "{clause}" without "if" is ignored')
        if "additionalItems" in s and not isinstance(s.get("items"), list):
            raise SchemaError('strict mode: "additionalItems" is ignored when "items" is not an array of schemas')
        fmt = s.get("format")
        if isinstance(fmt, str) and fmt not in _KNOWN_FORMATS:
            raise SchemaError(f'unknown format "{fmt}" ignored in schema at path "{sp}"')
        props, pats = s.get("properties"), s.get("patternProperties")
        if isinstance(props, dict) and isinstance(pats, dict):
            for pat in pats:
                for prop in props:
                    if _js_regex(pat).search(prop):
                        raise SchemaError(f"strict mode: property {prop} matches pattern {pat} "
                                          "(use allowMatchingProperties)")
        for key in ("$ref", "not", "anyOf", "oneOf", "allOf", "if", "then", "else", "additionalItems", "items",
                    "contains", "propertyNames", "additionalProperties", "dependencies", "properties",
                    "patternProperties"):
            if key not in s:
                continue
            v = s[key]
            if key == "$ref":
                self._strict(self.resolve(v), v, seen)
            elif key in ("anyOf", "oneOf", "allOf") or (key == "items" and isinstance(v, list)):
                for i, sub in enumerate(v):
                    self._strict(sub, f"{sp}/{key}/{i}", seen)
            elif key in ("properties", "patternProperties", "dependencies"):
                for name, sub in v.items():
                    self._strict(sub, f"{sp}/{key}/{_fragment(name)}", seen)
            else:
                self._strict(v, f"{sp}/{key}", seen)


def _duplicate_pair(items: list, item_schema: Any) -> tuple[int, int] | None:
    """The (i, j) Ajv's uniqueItems reports: a typed fast path when `items` declares only
    scalar types, a pairwise scan otherwise; both scan from the end."""
    types = _Ajv._types(item_schema) if isinstance(item_schema, dict) else []
    if types and not any(t in ("object", "array") for t in types):
        seen: dict = {}
        for i in range(len(items) - 1, -1, -1):
            item = items[i]
            if not any(_ajv_type_ok(t, item) for t in types):
                continue
            key = ("s", item) if isinstance(item, str) else ("b", item) if isinstance(item, bool) else \
                ("n", item) if _is_number(item) else ("z", None)
            if len(types) == 1 and key[0] == "s":
                key = ("s", item)
            if key in seen:
                return i, seen[key]
            seen[key] = i
        return None
    for i in range(len(items) - 1, 0, -1):
        for j in range(i - 1, -1, -1):
            if _js_equal(items[i], items[j]):
                return i, j
    return None


@functools.lru_cache(maxsize=1)
def _meta_ajv() -> _Ajv:
    from jsonschema import Draft7Validator

    return _Ajv(Draft7Validator.META_SCHEMA)


def errors_text(errors: list[dict]) -> str:
    """Ajv's errorsText."""
    if not errors:
        return "No errors"
    return ", ".join(f"data{e['instancePath']} {e['message']}" for e in errors)


_COMPILED: dict[str, _Ajv] = {}


def compile_schema(schema: Any) -> _Ajv:
    """Ajv.compile with promptfoo's options; raises SchemaError with Ajv's message."""
    if schema is None:  # a YAML value that loads to null
        raise SchemaError("Cannot read properties of null (reading '$id')")
    if not isinstance(schema, (dict, bool, list)):
        raise SchemaError("schema must be object or boolean")
    if isinstance(schema, list):
        raise SchemaError("schema is invalid: " + errors_text(_meta_ajv().errors(schema)))
    try:
        key = json.dumps(schema, sort_keys=True, default=str)
    except (TypeError, ValueError):
        key = None
    if key is not None and key in _COMPILED:
        return _COMPILED[key]
    if isinstance(schema, dict):
        declared = schema.get("$schema")
        if declared is not None and declared not in _DRAFT7_IDS:
            raise SchemaError(f'no schema with key or ref "{declared}"')
        meta_errors = _meta_ajv().errors(schema)
        if meta_errors:
            raise SchemaError("schema is invalid: " + errors_text(meta_errors))
        schema = {k: v for k, v in schema.items() if k != "$schema"}
    compiled = _Ajv(schema)
    compiled.check_strict()
    if key is not None:
        if len(_COMPILED) > 256:
            _COMPILED.clear()
        _COMPILED[key] = compiled
    return compiled


def _schema_from_value(value: Any, name: str) -> _Ajv:
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


def _schema_errors(compiled: _Ajv, data: Any) -> list[dict]:
    try:
        return compiled.errors(data)
    except SchemaError as exc:
        raise AssertionError_(str(exc)) from None


# ------------------------------------------------------------------------------ is-json family


@assertion("is-json")
def is_json(ctx: AssertionContext) -> GradingResult:
    text = _output_string(ctx.output)
    inverse = ctx.inverse
    try:
        parsed, is_valid = _json_parse(text), True
    except ValueError:
        parsed, is_valid = None, False
    passed = is_valid != inverse
    if is_valid and _js_truthy(ctx.value):
        compiled = _schema_from_value(ctx.value, "is-json")
        errors = _schema_errors(compiled, parsed)
        passed = bool(errors) if inverse else not errors
        if not passed:
            reason = ("Output is JSON that conforms to the provided schema" if inverse else
                      f"JSON does not conform to the provided schema. Errors: {errors_text(errors)}")
            return _verdict(ctx, False, reason)
    return _verdict(ctx, passed, "Expected output to be valid JSON")


@assertion("contains-json")
def contains_json(ctx: AssertionContext) -> GradingResult:
    text = _output_string(ctx.output)
    inverse = ctx.inverse
    message = "Expected output to contain valid JSON"
    objects = extract_json_objects(text)
    passed = (not objects) if inverse else bool(objects)
    if _js_truthy(ctx.value):
        for obj in objects:
            compiled = _schema_from_value(ctx.value, "contains-json")
            errors = _schema_errors(compiled, obj)
            passed = bool(errors) if inverse else not errors
            if not errors:
                if inverse:
                    message = "Output contains JSON conforming to the provided schema"
                break
            message = f"JSON does not conform to the provided schema. Errors: {errors_text(errors)}"
    return _verdict(ctx, passed, message)


# ------------------------------------------------------------------------------------- HTML

_MAX_INPUT_SIZE = 10 * 1024 * 1024
_WRAPPER_LITERAL = {tag: re.compile(rf"<{tag}(?=[\s>/])") for tag in ("html", "head", "body")}
_VALID_HTML_ELEMENTS = frozenset("""
html head title base link meta style body article section nav aside h1 h2 h3 h4 h5 h6 header footer
address p hr pre blockquote ol ul li dl dt dd figure figcaption main div a em strong small s cite q
dfn abbr ruby rt rp data time code var samp kbd sub sup i b u mark bdi bdo span br wbr img iframe
embed object param picture source video audio track map area svg math script noscript canvas ins
del table caption colgroup col tbody thead tfoot tr td th form label input button select datalist
optgroup option textarea output progress meter fieldset legend details summary dialog menu slot
template""".split())

_HTML_INDICATORS = {
    "opening": re.compile(r"<[a-zA-Z][a-zA-Z0-9-]*(?:\s[^>]*)?>"),
    "closing": re.compile(r"</[a-zA-Z][a-zA-Z0-9-]*\s*>"),
    "self_closing": re.compile(r"<[a-zA-Z][a-zA-Z0-9-]*(?:\s[^>]*)?/>"),
    "entity": re.compile(r"&(?:[a-zA-Z]+|#[0-9]+|#x[0-9a-fA-F]+);"),
    "doctype": re.compile(r"<!DOCTYPE\s+html", re.I),
    "comment": re.compile(r"<!--[^-]*(?:-[^-]+)*-->"),
    "attribute": re.compile(r"\s[a-zA-Z-]+=\s*[\"'][^\"']*[\"']"),
    "common_tag": re.compile(r"<(html|head|body|div|span|p|a|img|h[1-6]|ul|ol|li|table|tr|td|th|form|input|"
                             r"button|script|style|link|meta|br|hr)\b", re.I | re.ASCII),
}


def contains_html_text(text: str) -> bool:
    """promptfoo's containsHtml: at least two points of HTML evidence."""
    if len(text) > _MAX_INPUT_SIZE:
        return False
    p = _HTML_INDICATORS
    points = 0
    opening, closing = bool(p["opening"].search(text)), bool(p["closing"].search(text))
    if opening and closing:
        points += 2
    elif opening or closing:
        points += 1
    for name, worth in (("self_closing", 1), ("entity", 1), ("doctype", 2), ("comment", 1), ("attribute", 1),
                        ("common_tag", 2)):
        if p[name].search(text):
            points += worth
    return points >= 2


@functools.lru_cache(maxsize=1)
def _html_builder():
    from html5lib import treebuilders

    base = treebuilders.getTreeBuilder("etree")

    class Builder(base):
        """Remembers which elements came from a start tag in the text (parse5's source location):
        html5lib's tokenizer tokens carry `selfClosingAcknowledged`, the tokens it implies do not."""

        def reset(self):
            super().reset()
            self.from_text: set[int] = set()

        def _mark(self, element, token):
            if "selfClosingAcknowledged" in token:
                self.from_text.add(id(element._element))

        def insertRoot(self, token):
            super().insertRoot(token)
            self._mark(self.openElements[-1], token)

        def insertElementNormal(self, token):
            element = super().insertElementNormal(token)
            self._mark(element, token)
            return element

        def insertElementTable(self, token):
            element = super().insertElementTable(token)
            self._mark(element, token)
            return element

    return Builder


def _tag_name(element) -> str | None:
    tag = element.tag
    if not isinstance(tag, str) or tag in ("DOCUMENT_ROOT", "DOCUMENT_FRAGMENT", "<!DOCTYPE>"):
        return None
    return tag.rsplit("}", 1)[-1].lower()


_HTML_FIRST = re.compile(r"(?:\s+|<!--.*?-->|<![^>]*>|<\?[^>]*>)*<html(?=[\s/>])", re.I | re.S)


def validate_html(text: str) -> tuple[bool, str]:
    """promptfoo's validateHtml: a parsed document with a recognised element and no bare text."""
    import html5lib

    trimmed = _js_trim(text)
    if not trimmed:
        return False, "Output is empty"
    if len(trimmed) > _MAX_INPUT_SIZE:
        return False, "Output exceeds maximum size limit"
    if re.match(r"\s*<\?xml", trimmed, re.I):
        return False, "Output appears to be XML, not HTML"
    parser = html5lib.HTMLParser(tree=_html_builder(), namespaceHTMLElements=False)
    document = parser.parse(trimmed, scripting=True)  # parse5's default: scripting enabled
    from_text = parser.tree.from_text
    if _HTML_FIRST.match(trimmed):  # html5lib implies the root and merges a leading <html> into it
        from_text.update(id(el) for el in document.iter() if _tag_name(el) == "html")
    lowered = trimmed.lower()
    elements = [(el, name) for el in document.iter() if (name := _tag_name(el))]

    def user_provided(element, name: str) -> bool:
        if name in _WRAPPER_LITERAL:
            return bool(_WRAPPER_LITERAL[name].search(lowered)) and id(element) in from_text
        return name in _VALID_HTML_ELEMENTS or "-" in name

    body = next((el for el, name in elements if name == "body"), None)
    if body is not None and not user_provided(body, "body"):
        texts = [body.text or ""] + [child.tail or "" for child in body]
        if any(_js_trim(t) for t in texts):
            return False, "Output must be wrapped in HTML tags"
    if not any(user_provided(el, name) for el, name in elements):
        return False, "Output does not contain recognized HTML elements"
    return True, "Output is valid HTML"


@assertion("contains-html")
def contains_html(ctx: AssertionContext) -> GradingResult:
    found = contains_html_text(_output_string(ctx.output))
    return _verdict(ctx, found != ctx.inverse,
                    f"Expected output to {'not ' if ctx.inverse else ''}contain HTML content")


@assertion("is-html")
def is_html(ctx: AssertionContext) -> GradingResult:
    valid, reason = validate_html(_output_string(ctx.output))
    return _verdict(ctx, valid != ctx.inverse, reason)


# -------------------------------------------------------------------------------------- XML


def _is_name_start(cp: int) -> bool:
    return (cp in (58, 95) or 65 <= cp <= 90 or 97 <= cp <= 122 or 192 <= cp <= 214 or 216 <= cp <= 246
            or 248 <= cp <= 767 or 880 <= cp <= 893 or 895 <= cp <= 8191 or 8204 <= cp <= 8205
            or 8304 <= cp <= 8591 or 11264 <= cp <= 12271 or 12289 <= cp <= 55295 or 63744 <= cp <= 64975
            or 65008 <= cp <= 65533 or 65536 <= cp <= 983039)


def _is_name_char(cp: int) -> bool:
    return _is_name_start(cp) or cp in (45, 46, 183) or 48 <= cp <= 57 or 768 <= cp <= 879 or 8255 <= cp <= 8256


def _read_name(text: str, start: int) -> tuple[str, int] | None:
    if start >= len(text) or not _is_name_start(ord(text[start])):
        return None
    end = start + 1
    while end < len(text) and _is_name_char(ord(text[end])):
        end += 1
    return text[start:end], end


def _tag_end(text: str, start: int) -> int:
    quote_char = None
    for i in range(start + 1, len(text)):
        ch = text[i]
        if quote_char:
            if ch == quote_char:
                quote_char = None
            continue
        if ch in "\"'":
            quote_char = ch
        elif ch == "<":
            return -1
        elif ch == ">":
            return i
    return -1


def _delimited_end(text: str, start: int, delimiter: str) -> int:
    found = text.find(delimiter, start)
    return len(text) - 1 if found == -1 else found + len(delimiter) - 1


def _declaration_end(text: str, start: int) -> int:
    if text.startswith("<!--", start):
        return _delimited_end(text, start + 4, "-->")
    if text.startswith("<![CDATA[", start):
        return _delimited_end(text, start + 9, "]]>")
    quote_char, depth = None, 0
    for i in range(start + 2, len(text)):
        ch = text[i]
        if quote_char:
            if ch == quote_char:
                quote_char = None
            continue
        if ch in "\"'":
            quote_char = ch
        elif ch == "[":
            depth += 1
        elif ch == "]" and depth > 0:
            depth -= 1
        elif ch == ">" and depth == 0:
            return i
    return len(text) - 1


def _read_tag(text: str, start: int) -> dict | None:
    """One markup construct at `start` ('<'), as promptfoo's XML scanner reads it."""
    if start + 1 >= len(text):
        return None
    nxt = text[start + 1]
    if nxt == "!":
        return {"kind": "declaration", "start": start, "end": _declaration_end(text, start)}
    if nxt == "?":
        return {"kind": "declaration", "start": start, "end": _delimited_end(text, start + 2, "?>")}
    if nxt == "/":
        name = _read_name(text, start + 2)
        if not name:
            return None
        end = _tag_end(text, start)
        return None if end == -1 else {"kind": "closing", "start": start, "end": end, "name": name[0]}
    name = _read_name(text, start + 1)
    if not name:
        return None
    end = _tag_end(text, start)
    if end == -1:
        return None
    last = end - 1
    while last > start and text[last].isspace():
        last -= 1
    return {"kind": "opening", "start": start, "end": end, "name": name[0], "name_end": name[1],
            "self_closing": text[last] == "/"}


def extract_xml_candidates(text: str) -> list[tuple[int, int]]:
    """promptfoo's extractXmlCandidates: balanced elements, sibling runs first, as (start, end)."""
    stack: list[tuple[str, int]] = []
    found: list[tuple[int, int, int | None]] = []
    i = 0
    while i < len(text):
        if text[i] != "<":
            i += 1
            continue
        tag = _read_tag(text, i)
        if tag is None:
            i += 1
            continue
        parent = stack[-1][1] if stack else None
        if tag["kind"] == "opening":
            if tag["self_closing"]:
                found.append((tag["start"], tag["end"] + 1, parent))
            else:
                stack.append((tag["name"], tag["start"]))
        elif tag["kind"] == "closing":
            if stack and stack[-1][0] == tag["name"]:
                _, open_start = stack.pop()
                found.append((open_start, tag["end"] + 1, stack[-1][1] if stack else None))
            else:
                stack.clear()
        i = tag["end"] + 1
    # orderXmlCandidates
    ordered: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()

    def add(start: int, end: int) -> None:
        if (start, end) not in seen:
            seen.add((start, end))
            ordered.append((start, end))

    starts = {c[0] for c in found}
    by_parent: dict = {}
    for c in found:
        by_parent.setdefault(c[2], []).append(c)
    for parent, siblings in by_parent.items():
        if len(siblings) <= 1 or (parent is not None and parent in starts):
            continue
        siblings = sorted(siblings, key=lambda c: (c[0], c[1]))
        add(siblings[0][0], siblings[-1][1])
    maximal = sorted((c for c in found if c[2] is None or c[2] not in starts), key=lambda c: (c[0], -c[1]))
    for c in maximal:
        add(c[0], c[1])
    return ordered


_ATTRIBUTE = re.compile(r"([^\s=/>]+)(?:\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+)))?")


class _XmlNode:
    __slots__ = ("attrs", "children", "text")

    def __init__(self, attrs: dict):
        self.attrs = attrs
        self.children: list[tuple[str, Any]] = []
        self.text: list[str] = []


def _attributes(raw: str) -> dict:
    attrs = {}
    for m in _ATTRIBUTE.finditer(raw):
        value = m.group(2) if m.group(2) is not None else m.group(3) if m.group(3) is not None else m.group(4)
        attrs["@_" + m.group(1)] = True if value is None else value
    return attrs


def _xml_value(node: _XmlNode) -> Any:
    text = "".join(node.text).strip()
    if not node.children and not node.attrs:
        return text
    obj: dict = dict(node.attrs)
    for name, child in node.children:
        value = _xml_value(child) if isinstance(child, _XmlNode) else child
        if name in obj:
            obj[name] = obj[name] + [value] if isinstance(obj[name], list) else [obj[name], value]
        else:
            obj[name] = value
    if text:
        obj["#text"] = text
    return obj


def xml_tree(text: str) -> dict:
    """The object fast-xml-parser makes of `text` (attributes as `@_name`, text as `#text`,
    repeated elements as arrays, processing instructions as `?target`); only key presence and
    object-vs-scalar matter to required element paths."""
    root = _XmlNode({})
    stack = [root]
    pos = i = 0
    while i < len(text):
        if text[i] != "<":
            i += 1
            continue
        tag = _read_tag(text, i)
        if tag is None:
            i += 1
            continue
        current = stack[-1]
        current.text.append(text[pos:i])
        body = text[i:tag["end"] + 1]
        if tag["kind"] == "declaration":
            if body.startswith("<![CDATA["):
                current.text.append(body[9:-3] if body.endswith("]]>") else body[9:])
            elif body.startswith("<?"):
                inner = body[2:-2] if body.endswith("?>") else body[2:]
                target = _read_name(inner, 0)
                if target:
                    attrs = _attributes(inner[target[1]:])
                    current.children.append(("?" + target[0], attrs if attrs else ""))
        elif tag["kind"] == "opening":
            raw = text[tag["name_end"]:tag["end"]]
            node = _XmlNode(_attributes(raw.rstrip().rstrip("/") if tag["self_closing"] else raw))
            current.children.append((tag["name"], node))
            if not tag["self_closing"]:
                stack.append(node)
        elif len(stack) > 1:
            stack.pop()
        pos = i = tag["end"] + 1
    stack[-1].text.append(text[pos:])
    value = _xml_value(root)
    return value if isinstance(value, dict) else {}


_OBJECT_PROTOTYPE = {"constructor", "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable",
                     "toLocaleString", "toString", "valueOf", "__proto__", "__defineGetter__",
                     "__defineSetter__", "__lookupGetter__", "__lookupSetter__"}


def _has_element_path(value: Any, path: list[str]) -> bool:
    current = value
    for key in path:
        if isinstance(current, list):
            if not _ARRAY_INDEX.match(key) or int(key) >= len(current):
                return False
            current = current[int(key)]
        elif isinstance(current, dict):
            if key in current:
                current = current[key]
            elif key in _OBJECT_PROTOTYPE:  # inherited from Object.prototype: defined, not an object
                current = len
            else:
                return False
        else:
            return False
    return True


def _missing_elements(tree: dict, required: list[str] | None) -> list[str]:
    if not required:
        return []
    return [el for el in required if not _has_element_path(tree, el.split("."))]


def _check_candidate(text: str, required: list[str] | None) -> tuple[bool, str]:
    missing = _missing_elements(xml_tree(text), required)
    if missing:
        return False, f"XML is missing required elements: {', '.join(missing)}"
    return True, "XML is valid and contains all required elements"


_PROLOG_DOCTYPE = re.compile(r"(?:<\?xml[^>]*\?>)?(?:\s+|<!--.*?-->|<\?.*?\?>)*<!DOCTYPE", re.S)


def _doctype_problem(text: str) -> str | None:
    """promptfoo's DOCTYPE rules: internal subsets are refused, malformed declarations fail."""
    m = _PROLOG_DOCTYPE.match(text)
    if not m:
        return None
    end = _declaration_end(text, m.end() - 9)
    doctype = text[m.end():end]
    quote_char = None
    for ch in doctype:
        if quote_char:
            if ch == quote_char:
                quote_char = None
        elif ch in "\"'":
            quote_char = ch
        elif ch == "[":
            return "DTD internal subsets are not supported by is-xml validation"
    if not _doctype_well_formed(doctype):
        return "XML parsing failed: Malformed DOCTYPE declaration"
    return None


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _quoted(text: str, i: int) -> tuple[str, int] | None:
    if i >= len(text) or text[i] not in "\"'":
        return None
    close = text.find(text[i], i + 1)
    return None if close == -1 else (text[i + 1:close], close + 1)


def _system_literal_ok(text: str, i: int) -> bool:
    start = _skip_ws(text, i)
    if start == i:
        return False
    lit = _quoted(text, start)
    return bool(lit) and "#" not in lit[0] and _skip_ws(text, lit[1]) == len(text)


def _doctype_well_formed(doctype: str) -> bool:
    i = _skip_ws(doctype, 0)
    if i == 0:
        return False
    name = _read_name(doctype, i)
    if not name:
        return False
    i = name[1]
    ext = _skip_ws(doctype, i)
    if ext == len(doctype):
        return True
    if ext == i:
        return False
    if doctype.startswith("SYSTEM", ext):
        return _system_literal_ok(doctype, ext + 6)
    if doctype.startswith("PUBLIC", ext):
        i = ext + 6
        start = _skip_ws(doctype, i)
        if start == i:
            return False
        lit = _quoted(doctype, start)
        if not lit or not re.fullmatch(r"[\x20\r\na-zA-Z0-9'()+,./:=?;!*#@$_%-]*", lit[0]):
            return False
        return _system_literal_ok(doctype, lit[1])
    return False


def validate_xml(text: str, required: list[str] | None) -> tuple[bool, str]:
    """is-xml: a well-formed document (namespaces checked), then the required element paths."""
    from xml.parsers import expat

    problem = _doctype_problem(text)
    if problem:
        return False, problem
    parser = expat.ParserCreate(encoding="UTF-8", namespace_separator=" ")
    try:
        parser.Parse(text.encode("utf-8", "surrogatepass"), True)
    except expat.ExpatError as exc:
        return False, f"XML parsing failed: {exc}"
    return _check_candidate(text, required)


def contains_xml_text(text: str, required: list[str] | None) -> tuple[bool, str]:
    candidates = extract_xml_candidates(text)
    if not candidates:
        return False, "No XML content found in the output"
    checked: list[tuple[int, int]] = []
    for start, end in candidates:
        if any(start >= s and end <= e for s, e in checked):
            continue
        ok, reason = _check_candidate(text[start:end], required)
        if ok:
            return True, reason
        checked.append((start, end))  # fast-xml-parser reads any candidate: it is "well-formed"
    return False, "No valid XML content found matching the requirements"


def _required_elements(value: Any) -> list[str] | None:
    if isinstance(value, str):
        return [el.strip() for el in value.split(",")]
    if isinstance(value, list) and value:
        return [templating.js_string(el) for el in value]
    if isinstance(value, dict) and value:
        if isinstance(value.get("requiredElements"), list):
            return [templating.js_string(el) for el in value["requiredElements"]]
        raise AssertionError_("xml assertion must contain a string, array value, or no value")
    return None


@assertion("is-xml")
def is_xml(ctx: AssertionContext) -> GradingResult:
    valid, reason = validate_xml(_output_string(ctx.output), _required_elements(ctx.value))
    return _verdict(ctx, valid != ctx.inverse, reason)


@assertion("contains-xml")
def contains_xml(ctx: AssertionContext) -> GradingResult:
    valid, reason = contains_xml_text(_output_string(ctx.output), _required_elements(ctx.value))
    return _verdict(ctx, valid != ctx.inverse, reason)


# -------------------------------------------------------------------------------------- SQL

_SELECT_MODIFIERS = "(?:all|distinct)"
_MYSQL_SELECT_MODIFIERS = ("(?:all|distinct(?:row)?|high_priority|straight_join|sql_(?:big_result|buffer_result|"
                           "cache|calc_found_rows|no_cache|small_result))")
_IDENT = "[A-Za-z_][A-Za-z0-9_]*"


def _missing_comma_pattern(modifiers: str) -> re.Pattern:
    return re.compile(rf"\bselect\s+(?:{modifiers}\s+)*(?!{modifiers}\b){_IDENT}\s+{_IDENT}\s+from\b", re.I)


_MISSING_COMMA = _missing_comma_pattern(_SELECT_MODIFIERS)
_MYSQL_MISSING_COMMA = _missing_comma_pattern(_MYSQL_SELECT_MODIFIERS)
_DOLLAR_QUOTE = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")

# node-sql-parser's databases -> sqlglot dialects ("" = sqlglot's generic dialect)
_SQL_DIALECTS = {
    "mysql": "mysql", "mariadb": "mysql", "postgresql": "postgres", "bigquery": "bigquery", "hive": "hive",
    "sqlite": "sqlite", "transactsql": "tsql", "snowflake": "snowflake", "redshift": "redshift",
    "trino": "trino", "athena": "athena", "db2": "", "flinksql": "", "noql": "",
}


def _quoted_end(sql: str, start: int, quote_char: str) -> int:
    closing = "]" if quote_char == "[" else quote_char
    i = start + 1
    while i < len(sql):
        if closing != "]" and sql[i] == "\\":
            i += 2
            continue
        if sql[i] == closing:
            if i + 1 < len(sql) and sql[i + 1] == closing:
                i += 2
                continue
            return i + 1
        i += 1
    return len(sql)


def _strip_ignored_sql(sql: str, database: str) -> str:
    """Quoted text and comments blanked out, so the heuristics only see SQL keywords."""
    brackets = database in ("TransactSQL", "Sqlite")
    chunks: list[str] = []
    plain = i = 0
    while i < len(sql):
        ch = sql[i]
        end = None
        replacement = " "
        if ch in "'\"`" or (ch == "[" and brackets):
            end, replacement = _quoted_end(sql, i, ch), " ? "
        elif (ch == "-" and sql[i + 1:i + 2] == "-") or ch == "#":
            end = i + 1
            while end < len(sql) and sql[end] not in "\r\n":
                end += 1
        elif ch == "/" and sql[i + 1:i + 2] == "*":
            close = sql.find("*/", i + 2)
            end = len(sql) if close == -1 else close + 2
        elif ch == "$":
            m = _DOLLAR_QUOTE.match(sql, i)
            if m:
                close = sql.find(m.group(0), i + len(m.group(0)))
                end = len(sql) if close == -1 else close + len(m.group(0))
                replacement = " ? "
        if end is None:
            i += 1
            continue
        chunks.extend((sql[plain:i], replacement))
        i = plain = end
    chunks.append(sql[plain:])
    return "".join(chunks)


class _SqlError(Exception):
    pass


def _parse_sql(sql: str, database: Any) -> list:
    """sqlglot standing in for node-sql-parser's parse(sql, {database})."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    if not isinstance(database, str):
        raise _SqlError("database.toLowerCase is not a function")
    key = database.lower()
    if key not in _SQL_DIALECTS:
        raise _SqlError(f"{database} is not supported currently")
    import logging

    log = logging.getLogger("sqlglot")
    level = log.level
    log.setLevel(logging.ERROR)  # "falling back to parsing as a Command" is ours to judge, not to print
    try:
        statements = [s for s in sqlglot.parse(sql.strip(), read=_SQL_DIALECTS[key] or None) if s is not None]
    except (SqlglotError, RecursionError, ValueError) as exc:
        raise _SqlError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    finally:
        log.setLevel(level)
    allowed = tuple(getattr(exp, name) for name in (
        "Query", "Insert", "Update", "Delete", "Create", "Drop", "Alter", "Merge", "Use", "Set", "Describe",
        "TruncateTable", "Transaction", "Commit", "Rollback", "Grant", "Revoke", "Show", "Cache", "Uncache",
        "Pragma", "Analyze", "LoadData", "Copy", "Kill", "Lock",
    ) if hasattr(exp, name))
    pieces = [p for p in re.split(r";", sql) if p.strip()]
    for statement, piece in zip(statements, pieces):
        statement.meta["source"] = piece
    for statement in statements:
        if isinstance(statement, exp.Command):
            if str(statement.this).upper() in ("REPLACE", "SHOW"):  # node-sql-parser knows these
                continue
            raise _SqlError(f"not a SQL statement: {statement.sql()[:60]!r}")
        if not isinstance(statement, allowed):
            raise _SqlError(f"not a SQL statement: {statement.sql()[:60]!r}")
        if isinstance(statement, exp.Select) and not statement.expressions:
            raise _SqlError("SELECT without a column list")
        if isinstance(statement, exp.Select) and not re.search(r"\bselect\b", _source_text(statement), re.I):
            raise _SqlError("a query must start with SELECT")  # sqlglot reads `FROM t` as SELECT * FROM t
        if key in ("mysql", "mariadb", "postgresql"):
            unsupported = (exp.Qualify, exp.Fetch) + ((exp.ILike,) if key != "postgresql" else ())
            if any(True for _ in statement.find_all(*unsupported)):
                raise _SqlError("syntax node-sql-parser does not accept for this database")
        if isinstance(statement, exp.Update) and not statement.expressions:
            raise _SqlError("UPDATE without SET")
        if key in ("mysql", "mariadb") and any(not isinstance(t.this, exp.Identifier)
                                               for t in statement.find_all(exp.Table)):
            raise _SqlError("table functions are not MySQL syntax")  # node-sql-parser rejects them
    if sql.count("`") % 2:
        raise _SqlError("unterminated backquoted identifier")
    if re.search(r",\s*(?:,|from\b|\)|$)", _strip_ignored_sql(sql, database), re.I):
        raise _SqlError("a comma with nothing after it")  # sqlglot tolerates these, node-sql-parser does not
    return statements


def _statement_kind(statement) -> str:
    from sqlglot import exp

    for cls, kind in ((exp.Insert, "insert"), (exp.Update, "update"), (exp.Delete, "delete"),
                      (exp.Create, "create"), (exp.Drop, "drop"), (exp.Alter, "alter")):
        if isinstance(statement, cls):
            return kind
    return "select"


def _authorities(statements) -> tuple[list[str], list[str]]:
    """node-sql-parser-style (tableList, columnList): `type::db::table`, `type::table::column`."""
    from sqlglot import exp

    tables: list[str] = []
    columns: list[str] = []
    for statement in statements:
        kind = _statement_kind(statement)
        target = statement.this if kind != "select" else None
        if isinstance(target, exp.Schema):
            target = target.this
        targets = {id(target)} | {id(t) for t in statement.args.get("tables") or [] if kind == "drop"}
        aliases: dict[str, str] = {}
        own: list[str] = []
        label = kind
        if kind in ("drop", "alter"):  # node-sql-parser keeps these keywords as written
            written = re.match(r"\s*([A-Za-z]+)", _source_text(statement))
            label = written.group(1) if written else kind
        for table in statement.find_all(exp.Table):
            if table.alias:
                aliases[table.alias] = table.name
            mine = id(table) in targets
            entry = f"{label if mine else 'select'}::{table.db or 'null'}::{table.name}"
            (own if mine else tables).append(entry)
        tables.extend(own)
        stmt_columns: list[str] = []
        for column in statement.find_all(exp.Column):
            if isinstance(column.this, exp.Star):
                name = "(.*)"
            else:
                name = column.name
            owner = aliases.get(column.table, column.table) if column.table else "null"
            stmt_columns.append((column, f"select::{owner}::{name}"))
        stmt_columns.sort(key=lambda item: _position(item[0]))
        late: list[str] = []
        set_targets = set()
        if kind == "update":
            for assignment in statement.args.get("expressions") or []:
                if isinstance(assignment, exp.EQ) and isinstance(assignment.this, exp.Column):
                    set_targets.add(id(assignment.this))
                    late.append(f"update::null::{assignment.this.name}")
        for column, entry in stmt_columns:
            if id(column) not in set_targets:
                columns.append(entry)
        if any(isinstance(e, exp.Star) for e in getattr(statement, "expressions", []) or []) \
                and isinstance(statement, exp.Select):
            columns.insert(0, "select::null::(.*)")
        if kind == "insert" and isinstance(statement.this, exp.Schema):
            late.extend(f"insert::{target.name}::{c.name}" for c in statement.this.expressions)
        if kind == "create" and isinstance(statement.this, exp.Schema):
            for column_def in statement.this.expressions:
                if isinstance(column_def, exp.ColumnDef):
                    late.extend((f"select::null::{column_def.name}", f"create::null::{column_def.name}"))
        if kind == "delete" and target is not None:
            late.append(f"delete::{target.name}::(.*)")
        columns.extend(late)
    return list(dict.fromkeys(tables)), list(dict.fromkeys(columns))


def _source_text(statement) -> str:
    return statement.meta.get("source", "") if hasattr(statement, "meta") else ""


def _position(node) -> int:
    meta = getattr(node, "meta", None) or {}
    if "start" in meta:
        return meta["start"]
    inner = getattr(node, "this", None)
    inner_meta = getattr(inner, "meta", None) or {}
    return inner_meta.get("start", 1 << 30)


def _whitelist_violation(authorities: list[str], whitelist: list) -> str | None:
    for authority in authorities:
        if not any(_js_regex_i("^" + templating.js_string(w) + "$").search(authority) for w in whitelist):
            return authority
    return None


@functools.lru_cache(maxsize=256)
def _js_regex_i(pattern: str) -> re.Pattern:
    return re.compile(_js_regex(pattern).pattern, re.I)


def check_sql(output: str, value: Any, inverse: bool) -> tuple[bool, str]:
    """promptfoo's handleIsSql."""
    database, allowed_tables, allowed_columns = "MySQL", None, None
    if _js_truthy(value) and isinstance(value, (dict, list)):
        if isinstance(value, dict):
            database = value.get("databaseType") or "MySQL"
            allowed_tables, allowed_columns = value.get("allowedTables"), value.get("allowedColumns")
    elif _js_truthy(value):
        raise AssertionError_("is-sql assertion must have a object value.")
    for name, lst in (("allowedTables", allowed_tables), ("allowedColumns", allowed_columns)):
        if lst is not None and not isinstance(lst, list):
            raise AssertionError_(f"is-sql {name} must be a list")
    syntax = f"SQL statement does not conform to the provided {templating.js_string(database)} database syntax."
    failures: list[str] = []
    normalized = _js_trim(output)
    if not normalized:
        failures.append(syntax)
    if normalized.count("`") % 2:
        failures.append(syntax)
    pattern = _MYSQL_MISSING_COMMA if database in ("MySQL", "MariaDB") else _MISSING_COMMA
    if pattern.search(_strip_ignored_sql(normalized, database)):
        failures.append(syntax)
    if database == "MySQL" and re.search(r"\bgenerate_series\s*\(", normalized, re.I):
        failures.append(syntax)
    statements = None
    parse_error = ""
    try:
        statements = _parse_sql(output, database)
        passed = not inverse
    except _SqlError as exc:
        passed = inverse
        parse_error = str(exc)
        failures.append(syntax)
    if failures:
        passed = inverse
    tables, columns = _authorities(statements) if statements is not None else ([], [])
    if allowed_tables:
        denied = parse_error or None if statements is None else _whitelist_violation(tables, allowed_tables)
        if denied is not None:
            passed = inverse
            if tables:
                failures.append(f"SQL references unauthorized table(s). Found: [{', '.join(tables)}]. "
                                f"Allowed: [{', '.join(templating.js_string(t) for t in allowed_tables)}].")
            else:
                failures.append(f"SQL validation failed: {_whitelist_message(denied, 'table', output, statements)}.")
    if allowed_columns:
        normalized_columns = [templating.js_string(c) for c in allowed_columns]
        for item in list(normalized_columns):
            parts = item.split("::")
            if len(parts) == 3 and parts[1] != "null":
                alt = f"{parts[0]}::null::{parts[2]}"
                if alt not in normalized_columns:
                    normalized_columns.append(alt)
        denied = parse_error or None if statements is None else _whitelist_violation(columns, normalized_columns)
        if denied is not None:
            passed = inverse
            if columns:
                failures.append(f"SQL references unauthorized column(s). Found: [{', '.join(columns)}]. "
                                f"Allowed: [{', '.join(templating.js_string(c) for c in allowed_columns)}].")
            else:
                failures.append(f"SQL validation failed: {_whitelist_message(denied, 'column', output, statements)}.")
    if inverse and not passed and not failures:
        failures.append("The output SQL statement is valid")
    return passed, " ".join(failures)


def _whitelist_message(denied: str, kind: str, sql: str, statements) -> str:
    if statements is None:  # the parser's own complaint
        return denied
    return f"authority = '{denied}' is required in {kind} whiteList to execute SQL = '{sql}'"


_FENCE_START = re.compile(r"[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^\r\n]*)\Z")
_FENCE_END = re.compile(r"[ \t]{0,3}(`{3,}|~{3,})[ \t]*\Z")


def extract_sql_blocks(text: str) -> list[str]:
    """Fenced code blocks with no language or `sql`, trimmed."""
    blocks: list[str] = []
    active = None
    for line in re.split(r"\r\n?|\n", text):
        if active is None:
            m = _FENCE_START.match(line)
            if m:
                fence, language = m.group(1), m.group(2).strip().lower()
                active = {"body": [], "char": fence[0], "length": len(fence), "sql": language in ("", "sql")}
            continue
        m = _FENCE_END.match(line)
        if m and m.group(1)[0] == active["char"] and len(m.group(1)) >= active["length"]:
            if active["sql"]:
                blocks.append(_js_trim("\n".join(active["body"])))
            active = None
        else:
            active["body"].append(line)
    return blocks


@assertion("is-sql")
def is_sql(ctx: AssertionContext) -> GradingResult:
    passed, reason = check_sql(_output_string(ctx.output), ctx.value, ctx.inverse)
    return _verdict(ctx, passed, reason)


@assertion("contains-sql")
def contains_sql(ctx: AssertionContext) -> GradingResult:
    text = _output_string(ctx.output)
    candidates = extract_sql_blocks(text) or [text]
    reason = "Output does not contain valid SQL"
    found = False
    for candidate in candidates:
        if not _js_trim(candidate):
            continue
        ok, why = check_sql(candidate, ctx.value, False)
        if ok:
            found = True
            break
        reason = why
    passed = found != ctx.inverse
    return _verdict(ctx, passed, "The output SQL statement is valid" if found else reason)


# ---------------------------------------------------------------- function and tool calls

# promptfoo providers whose class implements validateFunctionToolCall, and the config key it reads
_OPENAI_COMPATIBLE = ("groq:", "deepseek:", "openrouter:", "xai:", "togetherai:", "perplexity:", "fireworks:",
                      "cerebras:")
_OPENAI_NOT_CHAT = {"responses", "completion", "embedding", "embeddings", "image", "moderation", "realtime",
                    "assistant", "transcription", "tts", "speech", "video", "chatkit", "agents", "codex",
                    "codex-sdk", "codex-app-server", "codex-desktop"}


def _function_schema_key(provider: Any) -> str | None:
    """Decided by the provider id as promptfoo's provider classes decide it (echo, scripts,
    anthropic:, azure:, bedrock:, ollama:, mistral:, litellm:, openai:responses:, … have none)."""
    pid = getattr(provider, "id", None)
    if not isinstance(pid, str):
        return None
    if pid.startswith(("google:", "vertex:")):
        return "tools"
    if pid.startswith("openai:"):
        parts = pid.split(":")
        return None if len(parts) > 2 and parts[1] in _OPENAI_NOT_CHAT else "functions"
    if pid.startswith(_OPENAI_COMPATIBLE) and not pid.startswith("groq:responses:"):
        return "functions"
    return None


class _CallError(Exception):
    pass


def _js_stringify_or_undefined(value: Any) -> str:
    return "undefined" if value is _UNDEFINED else _js_json(value)


_UNDEFINED = object()


def _load_definitions(value: Any, provider: Any) -> Any:
    """`file://tools.json|yaml` (also inside a list, whose arrays are then flattened) as promptfoo
    loads tool and function definitions; script-backed definitions are not supported."""
    if isinstance(value, list):
        loaded = [_load_definitions(v, provider) for v in value]
        if loaded and all(isinstance(v, list) for v in loaded):
            return [item for v in loaded for item in v]
        return loaded
    if isinstance(value, str) and value.startswith("file://"):
        from pathlib import Path

        from factcli import sources
        from factcli.errors import ConfigError

        path, func = sources.ref_path(value, Path(getattr(provider, "base_dir", None) or Path.cwd()))
        if func or path.suffix.lower() not in (".json", ".yaml", ".yml"):
            raise AssertionError_(f"cannot load tool definitions from {value}: use a .json or .yaml file")
        try:
            return sources.load_structured(path)
        except ConfigError as exc:
            raise AssertionError_(f"Failed to load tools from {value}: {exc}") from None
    return value


def _provider_config(provider: Any) -> dict:
    spec = getattr(provider, "spec", None)
    config = getattr(spec, "config", None) if spec is not None else getattr(provider, "config", None)
    return config if isinstance(config, dict) else {}


def validate_function_call(output: Any, functions: Any, variables: dict, provider: Any = None) -> None:
    """promptfoo's validateFunctionCall; raises _CallError with promptfoo's message."""
    if output is None:
        raise _CallError("Cannot use 'in' operator to search for 'function_call' in null")
    if isinstance(output, dict) and "function_call" in output:
        output = output["function_call"]
    call = output
    if not (isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(call.get("arguments"), str)):
        raise _CallError(f"OpenAI did not return a valid-looking function call: {_js_stringify_or_undefined(call)}")
    functions = templating.render_value(functions, variables) if variables else functions
    functions = _load_definitions(functions, provider)
    try:
        arguments = _json_parse(call["arguments"])
    except ValueError as exc:
        raise _CallError(f"Function call arguments are not valid JSON: {exc}") from None
    name = call["name"]
    schema = None
    if isinstance(functions, list):
        for fn in functions:
            if isinstance(fn, dict) and fn.get("name") == name:
                schema = fn.get("parameters")
                break
    if schema is None:
        raise _CallError(f'Called "{name}", but there is no function with that name')
    try:
        errors = compile_schema(schema).errors(_jsify(arguments))
    except SchemaError as exc:
        raise _CallError(str(exc)) from None
    if errors:
        raise _CallError(f'Call to "{name}" does not match schema: {_js_json(errors)}')


_GEMINI_SCHEMA_KEYS = {"type", "format", "description", "nullable", "enum", "maxItems", "minItems", "properties",
                       "required", "propertyOrdering", "items"}
_GEMINI_TYPES = {"string": "STRING", "number": "NUMBER", "integer": "INTEGER", "boolean": "BOOLEAN", "array": "ARRAY",
                 "object": "OBJECT", "null": "STRING"}
_GEMINI_VALID_TYPES = {"TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"}


def _gemini_schema(schema: Any) -> Any:
    """promptfoo's sanitizeSchemaForGemini: Gemini's schema subset, upper-case types."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key not in _GEMINI_SCHEMA_KEYS:
            continue
        if key == "type" and isinstance(value, str):
            out[key] = _GEMINI_TYPES.get(value.lower(), value.upper())
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _gemini_schema(sub) if isinstance(sub, dict) else sub for name, sub in value.items()}
        elif key == "items" and isinstance(value, dict):
            out[key] = _gemini_schema(value)
        else:
            out[key] = value
    return out


def _lower_schema_types(node: Any) -> Any:
    """promptfoo's normalizeSchemaTypes: Gemini's upper-case types back to JSON Schema's."""
    if isinstance(node, list):
        return [_lower_schema_types(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str) and value in _GEMINI_VALID_TYPES:
            out[key] = value.lower()
        elif key == "type" and isinstance(value, list):
            out[key] = [t.lower() if isinstance(t, str) and t in _GEMINI_VALID_TYPES else t for t in value]
        else:
            out[key] = _lower_schema_types(value)
    return out


def _gemini_tool(tool: Any) -> Any:
    """promptfoo's normalizeTools for function declarations."""
    if not (isinstance(tool, dict) and isinstance(tool.get("functionDeclarations"), list)):
        return tool
    declarations = []
    for fd in tool["functionDeclarations"]:
        if isinstance(fd, dict):
            fd = dict(fd, parameters=_gemini_schema(fd["parameters"])) if fd.get("parameters") else \
                {k: v for k, v in fd.items() if k != "parameters"}
        declarations.append(fd)
    return dict(tool, functionDeclarations=declarations)


def validate_google_function_call(output: Any, tools: Any, variables: dict, provider: Any = None) -> None:
    """The validator of promptfoo's Google (AI Studio / Vertex / Live) providers."""
    try:
        parsed = _json_parse(output) if isinstance(output, str) else output
        if isinstance(parsed, dict) and "toolCall" in parsed:
            parsed = parsed["toolCall"]
            calls = parsed.get("functionCalls", _UNDEFINED) if isinstance(parsed, dict) else _UNDEFINED
        elif isinstance(parsed, list):
            if any(item is None for item in parsed):
                raise ValueError("null item")
            calls = [item["functionCall"] for item in parsed if isinstance(item, dict) and "functionCall" in item]
        else:
            raise ValueError("Unrecognized function call format")
    except ValueError:
        raise _CallError(f"Google did not return a valid-looking function call: {_js_stringify_or_undefined(output)}") \
            from None
    tools = templating.render_value(tools, variables) if variables else tools
    tools = _load_definitions(tools, provider)
    if isinstance(tools, list):
        tools = [_gemini_tool(t) for t in tools]
    if not isinstance(calls, list):
        raise _CallError("functionCalls is not iterable")
    for call in calls:
        name = call.get("name") if isinstance(call, dict) else None
        args = call.get("args", _UNDEFINED) if isinstance(call, dict) else _UNDEFINED
        if isinstance(args, str):
            try:
                args = _json_parse(args)
            except ValueError as exc:
                raise _CallError(f"Function call arguments are not valid JSON: {exc}") from None
        declarations = None
        if isinstance(tools, list):
            holder = next((t for t in tools if isinstance(t, dict) and "functionDeclarations" in t), None)
            declarations = holder.get("functionDeclarations") if holder else None
        declaration = next((fd for fd in declarations if isinstance(fd, dict) and fd.get("name") == name), None) \
            if isinstance(declarations, list) else None
        if declaration is None:
            raise _CallError(f'Called "{templating.js_string(name) if name is not None else "undefined"}", '
                             "but there is no function with that name")
        if args is _UNDEFINED or args is None:
            raise _CallError("Cannot convert undefined or null to object")
        parameters = declaration.get("parameters")
        has_args = bool(args) if isinstance(args, (dict, list, str)) else False
        if has_args and _js_truthy(parameters):
            try:
                compiled = compile_schema(_lower_schema_types(parameters))
            except SchemaError as exc:
                raise _CallError(f"Tool schema doesn't compile with ajv: Error: {exc}. If this is a valid tool schema "
                                 "you may need to reformulate your assertion without is-valid-function-call.") from None
            errors = compiled.errors(_jsify(args))
            if errors:
                raise _CallError(f'Call to "{name}":\n{_js_json(call)}\ndoes not match schema:\n{_js_json(errors)}')
        elif not (_js_json(args) == "{}" and not _js_truthy(parameters)):
            raise _CallError(f'Call to "{name}":\n{_js_json(call)}\ndoes not match schema:\n{_js_json(declaration)}')


@assertion("is-valid-openai-function-call", "is-valid-function-call")
def is_valid_function_call(ctx: AssertionContext) -> GradingResult:
    # promptfoo ignores `not-` here
    key = _function_schema_key(ctx.provider)
    if key is None:
        return _verdict(ctx, False, "Provider does not have functionality for checking function call.")
    validate = validate_google_function_call if key == "tools" else validate_function_call
    try:
        validate(ctx.output, _provider_config(ctx.provider).get(key), ctx.vars, ctx.provider)
    except (_CallError, SchemaError) as exc:
        return _verdict(ctx, False, str(exc))
    return _verdict(ctx, True, "")


_MCP_ERROR = re.compile(r"MCP Tool Error \(([^)]+)\): (.+)")
_MCP_RESULT = re.compile(r"MCP Tool Result \(([^)]+)\):")


def _looks_like_tool_call(call: Any) -> bool:
    fn = call.get("function") if isinstance(call, dict) else None
    return isinstance(fn, dict) and isinstance(fn.get("name"), str) and isinstance(fn.get("arguments"), str)


@assertion("is-valid-openai-tools-call")
def is_valid_tools_call(ctx: AssertionContext) -> GradingResult:
    # promptfoo ignores `not-` here
    output = ctx.output
    text = output if isinstance(output, str) else _js_json(output)
    if "MCP Tool Result" in text or "MCP Tool Error" in text:
        if "MCP Tool Error" in text:
            m = _MCP_ERROR.search(text)
            return _verdict(ctx, False, f"MCP tool call failed for {m.group(1) if m else 'unknown'}: "
                                        f"{m.group(2) if m else 'unknown error'}")
        m = _MCP_RESULT.search(text)
        return GradingResult(passed=True, score=1.0, assertion=ctx.assertion,
                             reason=f"MCP tool call succeeded for {m.group(1) if m else 'unknown'}")
    if output is None:
        raise AssertionError_("Cannot use 'in' operator to search for 'tool_calls' in null")
    if isinstance(output, dict) and "tool_calls" in output:
        output = output["tool_calls"]
    if not isinstance(output, list) or not output or not all(_looks_like_tool_call(c) for c in output):
        return _verdict(ctx, False, "OpenAI did not return a valid-looking tools response: "
                                    f"{_js_stringify_or_undefined(output)}")
    if ctx.provider is None:
        raise AssertionError_("Cannot read properties of undefined (reading 'config')")
    tools = _provider_config(ctx.provider).get("tools")
    if tools is not None and ctx.vars:
        tools = templating.render_value(tools, ctx.vars)
    tools = _load_definitions(tools, ctx.provider)
    if not _js_truthy(tools):
        return _verdict(ctx, False, "No tools configured in provider, but output contains tool calls")
    if not isinstance(tools, list):
        return _verdict(ctx, False, "tools.filter is not a function")
    functions = [t["function"] for t in tools
                 if isinstance(t, dict) and t.get("type") == "function" and "function" in t]
    try:
        for call in output:
            validate_function_call(call["function"], functions, {})
    except (_CallError, SchemaError) as exc:
        return _verdict(ctx, False, str(exc))
    return _verdict(ctx, True, "")
