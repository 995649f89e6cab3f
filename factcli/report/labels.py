"""How a column is named on screen: its provider and a short prompt label, both on one line each.

A prompt's stored label is promptfoo's: the `label` the config gave it, else the whole template,
which may span many lines (or be the JSON of chat messages). Tables show the given label, or the
first line of the template cut with an ellipsis, so one prompt never takes a screen.
"""

from __future__ import annotations

import json
from typing import Any

from factcli.report.escapes import visible

PROMPT_CHARS = 40  # a short prompt label, before the width of a table cuts it further


def one_line(text: Any, limit: int | None) -> str:
    """`text` with its whitespace (newlines too) collapsed to single spaces and its control characters
    shown as escapes (report/escapes.py), cut to `limit` with …."""
    if text is None:
        return ""
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False)
    text = visible(" ".join(text.split()))
    if limit is not None and len(text) > limit:
        return text[: max(1, limit - 1)] + "…"
    return text


def test_label(description: str | None, variables: Any, limit: int | None = None) -> str:
    """How a test is named beside its number (its test index, what `factcli show RUN N` takes): its
    description, else its vars. promptfoo's `Row #n` of a CSV row is not a description a user gave, and
    counted from 1 it would read as a second row number beside the first (types.row_description)."""
    from factcli.types import is_row_description

    if description and not is_row_description(description):
        return one_line(description, limit)
    if isinstance(variables, dict):
        return one_line(", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in variables.items()),
                        limit)
    return one_line(variables, limit)


def _template_text(raw: str) -> str:
    """The text a reader recognises a template by: for chat messages, the last user message."""
    stripped = raw.strip()
    if stripped.startswith("["):
        try:
            messages = json.loads(stripped)
        except ValueError:
            return raw
        if isinstance(messages, list) and all(isinstance(m, dict) for m in messages) and messages:
            users = [m for m in messages if m.get("role") == "user"] or messages
            content = users[-1].get("content")
            return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return raw


def short_prompt(label: str | None, raw: str | None = None, limit: int = PROMPT_CHARS) -> str:
    """A prompt's label as a table shows it. A label the config gave (it differs from the template)
    is kept, on one line; a label that is the template itself becomes the template's first
    non-blank line, with … when lines were left out or it was cut."""
    label = label or ""
    if raw is not None and label != raw:
        return one_line(label, limit)
    text = _template_text(label)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    first = " ".join(lines[0].split())
    if len(lines) > 1 and len(first) < limit:
        return first + "…"
    return one_line(first, limit)


def provider_name(c: dict) -> str:
    """The provider of a stored column (a `columns` row of the store): its label, else its id."""
    return one_line(c.get("provider_label") or c.get("provider_id") or "", None)


def column_label(c: dict) -> str:
    """A stored column on one line: `[provider] short prompt`."""
    return f"[{provider_name(c)}] {short_prompt(c.get('prompt_label'), c.get('prompt_raw'))}"


def column_label_of(provider: str, prompt_label: str, prompt_raw: str | None) -> str:
    """The same label for a column of a run in memory (summary after an eval)."""
    return f"[{one_line(provider, None)}] {short_prompt(prompt_label, prompt_raw)}"
