"""Jinja2 filters of the web pages: figures printed as the terminal and the HTML report print them
(report/figures, report/view), so a number reads the same everywhere."""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import quote

from markupsafe import Markup

from factcli.report import figures, view


def pct(value: Any, digits: int = 1) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return "—"
    return f"{value * 100:.{digits}f}%"


def num(value: Any, digits: int = 3) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return "—"
    return f"{value:.{digits}f}"


def signed(value: Any, percent: bool = False) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "—"
    return f"{value * 100:+.1f} pts" if percent else f"{value:+.3f}"


def interval(ci: Any, percent: bool = True, sign: bool = False) -> str:
    if not ci or len(ci) != 2 or not all(isinstance(v, (int, float)) for v in ci):
        return ""
    if percent:
        return "[" + ", ".join(f"{v * 100:{'+' if sign else ''}.1f}" for v in ci) + "]"
    return "[" + ", ".join(f"{v:{'+' if sign else ''}.3f}" for v in ci) + "]"


def cost(value: Any, unpriced: int = 0) -> str:
    return figures.fmt_cost(value, unpriced or 0)


def as_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)


def html(value: str) -> Markup:
    """A piece already escaped by report/html_page (every text in it goes through html.escape)."""
    return Markup(value)


def urlpart(value: Any) -> str:
    return quote(str(value), safe="")


def described(value: Any) -> str:
    """A test's description beside its number, promptfoo's `Row #n` of a CSV row left out
    (report/labels.test_label): the number is the test index, as everywhere."""
    from factcli.types import is_row_description

    return "" if not value or is_row_description(value) else str(value)


FILTERS = {"pct": pct, "num": num, "signed": signed, "interval": interval, "cost": cost, "text": as_text,
           "prebuilt": html, "when": view.when, "duration": view.duration, "one_line": view.one_line,
           "urlpart": urlpart, "described": described}
