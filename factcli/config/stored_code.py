"""The code a config holds or names, found in its raw mapping without loading it (loading imports
Python modules): inline scripts (`python` / `javascript` assertions, `fn:`/`eval:`/`javascript:`
values, transforms, JavaScript derived metrics), files of code (`file://x.py[:fn]`, `.js`, `.ts`: assertions, prompt functions,
script providers and vars, test generators, filters, extension hooks) and `exec:` providers.

A resumed run whose config files are gone is rebuilt from the config stored with it: that code came
from the store, which anyone who can write the database may have changed, so run/session.py lists it
and refuses unless `--trust-stored-code` (docs/team.md, "What a shared store trusts").
"""

from __future__ import annotations

import re

from factcli.scoring.registry import CODE
from factcli.sources import SCRIPT_SUFFIXES

_TRANSFORM_KEYS = {"transform", "contextTransform", "transformVars"}
_INLINE_PREFIXES = ("javascript:", "fn:", "eval:", "python:")
_CODE_FILE = re.compile(r"^(?:file://)?(?P<path>[^\s]+?(?:" + "|".join(re.escape(s) for s in SCRIPT_SUFFIXES)
                        + r"))(?::[\w.$]+)?$", re.IGNORECASE)


def code_in(config) -> list[str]:
    """One line per piece of code in `config`: its key path and the code (its first line) or file."""
    found: list[str] = []
    _walk(config, "", found)
    return list(dict.fromkeys(found))


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    first = first if len(first) <= 200 else first[:199] + "…"
    return first + (f" (+{len(lines) - 1} lines)" if len(lines) > 1 else "")


def _walk(node, where: str, found: list[str], text_value: bool = False) -> None:
    """`text_value`: the value of an assertion that is no script (`contains: "fn: x"` is text)."""
    if isinstance(node, dict):
        kind = node.get("type")
        value = node.get("value")
        script = isinstance(kind, str) and kind.removeprefix("not-") in CODE
        if script and isinstance(value, str) \
                and not _CODE_FILE.match(value.strip()):
            found.append(f"{where}: inline {kind.removeprefix('not-')} assertion: {_first_line(value)}")
        for key, child in node.items():
            path = f"{where}.{key}" if where else str(key)
            if key in _TRANSFORM_KEYS and isinstance(child, str) and not _CODE_FILE.match(child.strip()):
                found.append(f"{path}: inline {key}: {_first_line(child)}")
            elif key == "derivedMetrics" and isinstance(child, list):
                from factcli.scoring.metrics import is_javascript

                for i, metric in enumerate(child):
                    value = metric.get("value") if isinstance(metric, dict) else None
                    if isinstance(value, str) and is_javascript(value):
                        found.append(f"{path}[{i}].value: inline javascript derived metric: {_first_line(value)}")
            elif key == "nunjucksFilters" and isinstance(child, dict):
                for name, ref in child.items():
                    found.append(f"{path}.{name}: filter code {ref}")
            else:
                _walk(child, path, found, key == "value" and isinstance(kind, str) and not script)
    elif isinstance(node, list):
        for i, child in enumerate(node):
            _walk(child, f"{where}[{i}]", found)
    elif isinstance(node, str):
        text = node.strip()
        if text.startswith("exec:"):
            found.append(f"{where}: runs a command: {_first_line(text[5:])}")
        elif _CODE_FILE.match(text) and (text.startswith(("file://", "python:"))
                                         or where.startswith(("prompts", "providers", "targets"))):
            found.append(f"{where}: code file {text}")
        elif text.startswith(_INLINE_PREFIXES) and not text_value:
            found.append(f"{where}: inline code: {_first_line(text)}")
