"""XML output assertions, scored as promptfoo 0.121.20 scores them: is-xml (the whole output is a
well-formed XML document holding the required element paths) and contains-xml (some balanced
element in the output holds them). is-xml's well-formedness check uses the stdlib expat parser
(with namespaces, like promptfoo's saxes); DOCTYPE internal subsets are refused as promptfoo refuses
them. Pass and score agree; the text after "XML parsing failed: " is expat's message, not saxes'.
contains-xml finds candidates with promptfoo's own tag scanner; required element paths are looked
up in a fast-xml-parser-shaped tree (`root.child`, `root.item.0`, `root.@_id`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from factcli import templating
from factcli.assertions.js_semantics import ARRAY_INDEX, output_string
from factcli.scoring.registry import AssertionContext, AssertionError_, assertion
from factcli.types import GradingResult



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


def _unquoted(text: str, start: int) -> Iterator[tuple[int, str]]:
    """The characters of `text` from `start` that stand outside a quoted attribute value."""
    quote_char = None
    for i in range(start, len(text)):
        ch = text[i]
        if quote_char:
            if ch == quote_char:
                quote_char = None
        elif ch in "\"'":
            quote_char = ch
        else:
            yield i, ch


def _tag_end(text: str, start: int) -> int:
    for i, ch in _unquoted(text, start + 1):
        if ch == "<":
            return -1
        if ch == ">":
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
    depth = 0
    for i, ch in _unquoted(text, start + 2):
        if ch == "[":
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


def _tags(text: str) -> Iterator[tuple[int, dict]]:
    """Each tag of `text` (_read_tag's), with where it starts, scanning on after its end; a `<` that
    starts no tag is text."""
    i = 0
    while i < len(text):
        if text[i] != "<":
            i += 1
            continue
        tag = _read_tag(text, i)
        if tag is None:
            i += 1
            continue
        yield i, tag
        i = tag["end"] + 1


def extract_xml_candidates(text: str) -> list[tuple[int, int]]:
    """promptfoo's extractXmlCandidates: balanced elements, sibling runs first, as (start, end)."""
    stack: list[tuple[str, int]] = []
    found: list[tuple[int, int, int | None]] = []
    for _, tag in _tags(text):
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
    pos = 0
    for i, tag in _tags(text):
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
        pos = tag["end"] + 1
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
            if not ARRAY_INDEX.match(key) or int(key) >= len(current):
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
    valid, reason = validate_xml(output_string(ctx.output), _required_elements(ctx.value))
    return ctx.verdict(valid != ctx.inverse, reason)


@assertion("contains-xml")
def contains_xml(ctx: AssertionContext) -> GradingResult:
    valid, reason = contains_xml_text(output_string(ctx.output), _required_elements(ctx.value))
    return ctx.verdict(valid != ctx.inverse, reason)
