"""The one template engine: a sandboxed Jinja2 environment, `<<var>>` native, `{{var}}` for promptfoo.

Rules (contract §3): one rendering pass; `<<x>>` is rewritten to `{{ x }}` in the template only,
never in values; values are inserted as they are and never rendered again; undefined names render
empty and are reported; `dump`/`json` are JSON.stringify without spaces.
"""

from __future__ import annotations

import json
import os
import re
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

from jinja2 import ChainableUndefined, TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment

_NATIVE = re.compile(r"(\\?)<<\s*([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*|\[[^\]<>]*\])*)\s*>>")
_missing: ContextVar[list | None] = ContextVar("factcli_missing", default=None)


class _RecordingUndefined(ChainableUndefined):
    """Renders as '' (as promptfoo's nunjucks does) and records the missing name."""

    def _record(self) -> None:
        missing = _missing.get()
        if missing is not None and self._undefined_name is not None:
            missing.append(self._undefined_name)

    def __str__(self) -> str:
        self._record()
        return ""

    def __iter__(self):
        self._record()
        return iter(())


def js_string(value: Any) -> str:
    """How JavaScript prints a value into a template, so promptfoo configs render the same text."""
    if value is None or isinstance(value, ChainableUndefined):
        return "" if value is None else str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    if isinstance(value, (list, tuple)):
        return ",".join(js_string(v) for v in value)
    if isinstance(value, dict):
        return dump(value)
    return str(value)


def to_fixed(x: float, digits: int = 2) -> str:
    """JavaScript's Number.prototype.toFixed: ties on the exact binary value round up."""
    from decimal import ROUND_HALF_UP, Decimal

    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def dump(value: Any, indent: Any = None) -> str:
    if isinstance(value, ChainableUndefined):
        return ""
    if indent:
        return json.dumps(value, indent=indent, ensure_ascii=False, default=str)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _make_env() -> SandboxedEnvironment:
    env = SandboxedEnvironment(
        undefined=_RecordingUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        finalize=js_string,
    )
    env.filters["dump"] = dump
    env.filters["json"] = dump
    return env


class _Environ:
    """`{{ env.NAME }}`: reads os.environ when used, so rendering never copies the environment."""

    def __getattr__(self, name: str) -> str:
        return os.environ.get(name, "")

    def __getitem__(self, name: str) -> str:
        return os.environ.get(name, "")

    def get(self, name: str, default: str = "") -> str:
        return os.environ.get(name, default)


_ENV = _make_env()
_ENV.globals["env"] = _Environ()


def to_jinja(template: str) -> str:
    """Rewrite native `<<name>>` placeholders to Jinja; `\\<<` stays a literal `<<`."""
    if "<<" not in template:
        return template

    def sub(m: re.Match) -> str:
        if m.group(1):
            return m.group(0)[1:]
        return "{{ " + m.group(2) + " }}"

    return _NATIVE.sub(sub, template)


def has_template(text: str) -> bool:
    return "{{" in text or "{%" in text or "<<" in text


@lru_cache(maxsize=4096)
def _compile(template: str):
    return _ENV.from_string(to_jinja(template))


class TemplateError(ValueError):
    pass


def check(template: str) -> None:
    """Raise TemplateError if the template does not parse."""
    try:
        _compile(template)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error: {exc.message} (line {exc.lineno})") from None


def render(template: str, variables: dict, missing: list | None = None) -> str:
    """Render one template string. Names that were undefined are appended to `missing`."""
    if not isinstance(template, str) or not has_template(template):
        return template
    try:
        compiled = _compile(template)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error: {exc.message} (line {exc.lineno})") from None
    ctx = variables
    token = _missing.set(missing if missing is not None else [])
    try:
        return compiled.render(ctx)
    except TemplateError:
        raise
    except Exception as exc:  # a filter or sandbox error in user templates
        raise TemplateError(f"template error: {exc}") from None
    finally:
        _missing.reset(token)


def render_value(value: Any, variables: dict) -> Any:
    """Render strings inside an assertion value (strings, lists, dicts) with the test vars."""
    if isinstance(value, str):
        return render(value, variables)
    if isinstance(value, list):
        return [render_value(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: render_value(v, variables) for k, v in value.items()}
    return value
