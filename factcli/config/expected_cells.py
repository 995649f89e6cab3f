"""promptfoo's `__expected` cell grammar (promptfoo-semantics §7): a CSV cell of a test file made an
assertion, and the cells whose prefix is a near miss of a type, which promptfoo reads as `equals`."""

from __future__ import annotations

import functools
import re

from factcli.scoring.registry import TYPES
from factcli.sources import JS_SUFFIXES, TS_SUFFIXES


@functools.cache
def _cell_pattern() -> re.Pattern:
    """The cell grammar's pattern, compiled at the first `__expected` cell rather than at import: an
    alternation of every type's name is slow to compile, and most evals have no such cell (issue 30)."""
    # promptfoo tries its enum's types in order, first match wins; only a name followed by `:` can match
    # where a longer one does (`similar:cosine:x` is `similar` with value `cosine:x`), and sorting puts
    # every name before the longer names it begins, as promptfoo's enum does
    names = sorted(name for name, facts in TYPES.items() if facts.in_promptfoo)
    return re.compile(
        r"^(not-)?(" + "|".join(re.escape(t) for t in names) + r")(?:\((\d+(?:\.\d+)?)\))?(?::([\s\S]*))?$"
    )


_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
# promptfoo's isJavascriptFile, which a `file://` cell of `__expected` is tested with: no `.tsx`
_CELL_JS_SUFFIXES = JS_SUFFIXES + tuple(s for s in TS_SUFFIXES if s != ".tsx")


def parse_number(value: str | None) -> float | None:
    """promptfoo's parseFiniteNumber: a strict number, else None."""
    text = (value or "").strip()
    if not _NUMBER.match(text):
        return None
    n = float(text)
    return n if n not in (float("inf"), float("-inf")) else None


def _is_js_file(ref: str) -> bool:
    path = ref.split(":", 1)[0] if re.search(r"\.(?:js|cjs|mjs|ts|cts|mts):", ref) else ref
    return path.endswith(_CELL_JS_SUFFIXES)


def assertion_from_string(cell: str) -> dict:
    """One `__expected` cell -> an assertion mapping (promptfoo-semantics §7, first match wins)."""
    for prefix in ("javascript:", "fn:", "eval:"):
        if cell.startswith(prefix):
            return {"type": "javascript", "value": cell[len(prefix):].strip()}
    if cell.startswith("file://") and _is_js_file(cell[7:]):
        return {"type": "javascript", "value": cell.strip()}
    if cell.startswith("grade:"):
        return {"type": "llm-rubric", "value": cell[6:]}
    if cell.startswith("llm-rubric:"):
        return {"type": "llm-rubric", "value": cell[11:]}
    if cell.startswith("python:") or (cell.startswith("file://") and (cell.endswith(".py") or ".py:" in cell)):
        return {"type": "python", "value": cell[7:].strip()}
    m = _cell_pattern().match(cell)
    if not m:
        return {"type": "equals", "value": cell}
    not_prefix, typ, threshold_text, value = m.groups()
    full = f"not-{typ}" if not_prefix else typ
    threshold = parse_number(threshold_text)
    facts = TYPES[typ]
    if facts.cell_value == "list":
        from factcli.assertions.text import split_commas

        return {"type": full, "value": split_commas(value) if value else value}
    out = {"type": full}
    if facts.cell_value == "json":
        if value is not None:
            out["value"] = value
        return out
    if facts.cell_threshold is not None:
        out["threshold"] = facts.cell_threshold if threshold is None else threshold
    if value is not None:
        out["value"] = value.strip()
    return out


# the prefixes assertion_from_string reads before the types
_OTHER_PREFIXES = ("javascript", "fn", "eval", "grade", "llm-rubric", "python", "file")
_TYPE_PREFIX = re.compile(r"(not-)?([A-Za-z][\w-]*)(?:\(\d+(?:\.\d+)?\))?:")


@functools.lru_cache(maxsize=256)
def _close_type(word: str) -> str | None:
    import difflib

    close = difflib.get_close_matches(word.lower(), [n for n, f in TYPES.items() if f.in_promptfoo], n=1, cutoff=0.8)
    return close[0] if close else None


def cell_near_miss(cell: str) -> tuple[str, str] | None:
    """(the prefix written, the type meant) of an `__expected` cell whose prefix is a near miss of a type
    (`contians: x`): promptfoo reads the whole cell as an `equals` value, silently."""
    end = cell.find(":")  # (every cell of a large file comes here: its prefix is looked up, once each)
    return None if end < 1 else _prefix_near_miss(cell[:end + 1].lstrip())


@functools.lru_cache(maxsize=1024)
def _prefix_near_miss(prefix: str) -> tuple[str, str] | None:
    m = _TYPE_PREFIX.fullmatch(prefix)
    if m is None or m.group(2) in TYPES or m.group(2) in _OTHER_PREFIXES:
        return None
    close = _close_type(m.group(2))
    return None if close is None else (prefix, (m.group(1) or "") + close)
