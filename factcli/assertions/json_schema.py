"""JSON Schema validation as promptfoo's Ajv 8 does it (draft-07, strict mode, ajv-formats), shared
by is-json / contains-json and the function- and tool-call checks: `compile_schema` refuses what Ajv
refuses to compile, a compiled schema's `errors` are the first error Ajv meets, and `errors_text` is
Ajv's errorsText.

Validity is decided by `jsonschema` (a draft-07 validator that, like Ajv, applies keywords beside
`$ref`), and the error text is rebuilt in Ajv's wording and Ajv's keyword order (`data/a must be
string`, composite errors from anyOf/oneOf included). Ajv's compile-time failures are reproduced:
a schema that fails the draft-07 meta-schema ("schema is invalid: …"), strict mode's unknown
keywords and formats, an unsupported `$schema`, an unresolvable `$ref`. Known differences: regular
expressions (`pattern`, `patternProperties`, the `regex` format) run on Python's `re` after
translating JS named groups, not on JS RegExp with the `u` flag; the long URI/URL format regexes of
ajv-formats are approximated; `formatMaximum` and friends are accepted but not enforced; only local
(`#…`) references resolve, never remote ones.
"""
from __future__ import annotations

import functools
import json
import math
from typing import Any
from urllib.parse import quote

from factcli import templating
from factcli.assertions.js_semantics import is_number, js_equal, js_keys, js_regex
from factcli.assertions.json_schema_formats import KNOWN_FORMATS, format_checker


# Deliberately not js_semantics.js_number, though both print numbers "as JavaScript does": the limits
# in these messages have always gone through the template rule, which differs in corners (1e-7 prints
# as "1e-07" here, "1e-7" there; a big int prints exactly here, rounded to a double there).
def _js_num(x: Any) -> str:
    return templating.js_string(x)


@functools.lru_cache(maxsize=1)
def _validator_class():
    import jsonschema
    from jsonschema import Draft7Validator, ValidationError

    checker = format_checker()

    base = Draft7Validator.VALIDATORS

    def type_(validator, types, instance, schema):
        if instance is None and schema.get("nullable") is True:
            return
        yield from base["type"](validator, types, instance, schema)

    def pattern(validator, patrn, instance, schema):
        if isinstance(instance, str) and not js_regex(patrn).search(instance):
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
        return is_number(x) and (isinstance(x, int) or math.isfinite(x))
    if t == "integer":
        return is_number(x) and (isinstance(x, int) or (math.isfinite(x) and x.is_integer()))
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


class AjvSchema:
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
            return [] if js_equal(d, v) else [err({"allowedValue": v}, "must be equal to constant")]
        if k == "enum":
            ok = isinstance(v, list) and any(js_equal(d, x) for x in v)
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
            for key in js_keys(d):
                if not self.valid(v, key):
                    found = self._first(v, key, ip, f"{sp}/propertyNames", True, key)
                    return found + [err({"propertyName": key}, "property name must be valid")]
            return []
        if k == "additionalProperties":
            props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
            patterns = list(s.get("patternProperties") or {}) if isinstance(s.get("patternProperties"), dict) else []
            extra = [key for key in js_keys(d)
                     if key not in props and not any(js_regex(p).search(key) for p in patterns)]
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
            for prop in js_keys(v):
                deps = v[prop]
                if isinstance(deps, list) and deps and prop in d:
                    missing = [x for x in deps if x not in d]
                    if missing:
                        joined = ", ".join(str(x) for x in deps)
                        word = "property" if len(deps) == 1 else "properties"
                        return [err({"property": prop, "missingProperty": missing[0], "depsCount": len(deps),
                                     "deps": joined}, f"must have {word} {joined} when property {prop} is present")]
            for prop in js_keys(v):
                if not isinstance(v[prop], list) and prop in d:
                    found = self._first(v[prop], d, ip, f"{sp}/dependencies/{_fragment(prop)}", composite, pn)
                    if found:
                        return found
            return []
        if k == "properties":
            if not isinstance(v, dict):
                return []
            for prop in js_keys(v):
                if prop in d:
                    found = self._first(v[prop], d[prop], ip + [prop], f"{sp}/properties/{_fragment(prop)}",
                                        composite, pn)
                    if found:
                        return found
            return []
        if k == "patternProperties":
            if not isinstance(v, dict):
                return []
            for pat in js_keys(v):
                for key in js_keys(d):
                    if js_regex(pat).search(key):
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
        if isinstance(fmt, str) and fmt not in KNOWN_FORMATS:
            raise SchemaError(f'unknown format "{fmt}" ignored in schema at path "{sp}"')
        props, pats = s.get("properties"), s.get("patternProperties")
        if isinstance(props, dict) and isinstance(pats, dict):
            for pat in pats:
                for prop in props:
                    if js_regex(pat).search(prop):
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
    types = AjvSchema._types(item_schema) if isinstance(item_schema, dict) else []
    if types and not any(t in ("object", "array") for t in types):
        seen: dict = {}
        for i in range(len(items) - 1, -1, -1):
            item = items[i]
            if not any(_ajv_type_ok(t, item) for t in types):
                continue
            key = ("s", item) if isinstance(item, str) else ("b", item) if isinstance(item, bool) else \
                ("n", item) if is_number(item) else ("z", None)
            if len(types) == 1 and key[0] == "s":
                key = ("s", item)
            if key in seen:
                return i, seen[key]
            seen[key] = i
        return None
    for i in range(len(items) - 1, 0, -1):
        for j in range(i - 1, -1, -1):
            if js_equal(items[i], items[j]):
                return i, j
    return None


@functools.lru_cache(maxsize=1)
def _meta_ajv() -> AjvSchema:
    from jsonschema import Draft7Validator

    return AjvSchema(Draft7Validator.META_SCHEMA)


def errors_text(errors: list[dict]) -> str:
    """Ajv's errorsText."""
    if not errors:
        return "No errors"
    return ", ".join(f"data{e['instancePath']} {e['message']}" for e in errors)


_COMPILED: dict[str, AjvSchema] = {}


def compile_schema(schema: Any) -> AjvSchema:
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
    compiled = AjvSchema(schema)
    compiled.check_strict()
    if key is not None:
        if len(_COMPILED) > 256:
            _COMPILED.clear()
        _COMPILED[key] = compiled
    return compiled

