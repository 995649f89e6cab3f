"""Hostile text stays text on a terminal: a model's output, a test file's vars, a grader's reason or a
teammate's description may hold control characters (ESC starting a sequence that sets the window
title, writes the clipboard with OSC 52 or hides a link with OSC 8; C1 controls; bidirectional
overrides that reorder what is read). `visible` shows each as an escape (`\\x1b`, `\\u202e`), so the
terminal prints it instead of obeying it.

`json_visible` is the same rule for JSON printed on a terminal (`view --json`, `show --json`, `list
--json`, `diff --json`): each such character inside a string is written as its JSON escape (`\\u202e`), so
the document is read back with the same values and the terminal obeys none of them.

It is the one rule for every terminal view: factcli's Console (report/summary.py) applies it to
every text it renders, before layout (render_str) and once more to every segment it writes (a
rich Text made directly), so the table, `view`, `show`, `diff`, the summaries, the progress bar
and the warnings all go through it. The web view and the HTML export escape HTML instead.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and the invisible marks and overrides of the
# bidirectional algorithm (the "Trojan Source" characters).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


may_hold_control = _CONTROL.search  # None: nothing to escape (a quick look, before any work)


def _escape(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every control character shown as an escape; newlines and tabs stay."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_escape, text)


def _json_escape(m: re.Match) -> str:
    return f"\\u{ord(m.group()):04x}"


def json_visible(text: str) -> str:
    """A JSON text with every control character `visible` escapes written as a JSON `\\uXXXX` escape
    (raw ones can only be inside strings: JSON's own syntax has none), the same document once parsed."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_json_escape, text)
