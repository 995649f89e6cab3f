"""The one template engine: a sandboxed Jinja2 environment that renders as promptfoo's Nunjucks.

Rules (contract §3): one rendering pass; `<<x>>` is rewritten to `{{ x }}` in the template only,
never in values, when the row has a var `x` (an undefined `<<x>>` stays as written, as promptfoo
sends it, and is reported); `\\<<` is a literal `<<`; values are inserted as they are and never
rendered again; undefined `{{ names }}` render empty and are reported; `dump`/`json` are JSON.stringify without spaces. Nunjucks semantics
(JavaScript truthiness, printing, loops over objects, its filters) live in `engine.py`,
`jsvalues.py` and `filters.py`. Custom filters (`nunjucksFilters:`) belong to the suite that
declares them (`Filters`): rendering uses the ones in force in the current context (`filters_used`, set
by the loader while a config loads and by the run while it plans and executes), so two runs in one
process, one after the other or side by side in asyncio tasks, never see each other's filters.

Errors: `check` and `render` raise `TemplateError` (a ValueError) for a syntax error, an unknown
filter or anything that fails while rendering; its message names the template (when the caller
gives `name`) and the line. Callers turn it into a ConfigError at load and an ERROR row at run time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

from factcli.errors import did_you_mean
from factcli.templating.jsvalues import dump, is_undefined, js_number, js_string, to_fixed, truthy

__all__ = [
    "TemplateError", "check", "dump", "filter_names", "has_template", "js_number", "js_string", "names_by_form", "native_names", "render",
    "render_value", "Filters", "filters_used", "to_fixed", "to_jinja", "truthy",
]

_NATIVE = re.compile(r"(\\?)<<\s*([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*|\[[^\]<>]*\])*)\s*>>")
_missing: ContextVar[list | None] = ContextVar("factcli_missing", default=None)
_TEMPLATE_FILE = "<template>"


class TemplateError(ValueError):
    """A template that does not parse, or fails while rendering. `line` is the template's line."""

    def __init__(self, detail: str, *, name: str | None = None, line: int | None = None, syntax: bool = False):
        self.detail = detail
        self.name = name
        self.line = line
        self.syntax = syntax
        kind = "template syntax error" if syntax else "template error"
        where = "".join((f" in {name}" if name else "", f" on line {line}" if line else ""))
        super().__init__(f"{kind}{where}: {detail}")


_ENV = None  # the Jinja environment (engine.make_env), built on first use: see _env


def _env():
    """Jinja (its import and the environment: a large part of a command's start) is loaded only for a
    template with more than `{{ name }}` in it: the others are parsed and rendered without it."""
    global _ENV
    if _ENV is None:
        from factcli.templating.engine import make_env

        _ENV = make_env(_missing)
    return _ENV


# ---------------------------------------------------------------- custom filters


class _FilterFailed(Exception):
    pass


def _plain(value: Any) -> Any:
    """What a user's filter receives: undefined as None, tuples as lists, nothing of Jinja's."""
    if is_undefined(value):
        return None
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str) and type(value) is not str:
        return str(value)
    return value


def _user_filter(name: str, fn: Callable) -> Callable:
    def call(value, *args, **kwargs):
        try:
            return fn(_plain(value), *(_plain(a) for a in args), **{k: _plain(v) for k, v in kwargs.items()})
        except Exception as exc:  # noqa: BLE001 - whatever the user's filter raised
            message = str(exc) or type(exc).__name__
            raise _FilterFailed(f"filter '{name}' failed: {message}") from None

    call.__name__ = f"filter_{name}"
    return call


class Filters:
    """A suite's custom filters (promptfoo's `nunjucksFilters:`): plain Python callables called as
    fn(value, *args), in prompts, var values and assertion values alike, overriding a built-in filter
    of the same name as in Nunjucks. Each set has its own Jinja environment (an overlay of the shared
    one) and its own compiled templates, since a compiled template holds the filter functions it was
    built with: nothing of one set is seen by a template rendered under another, and both go with
    the suite that holds them."""

    __slots__ = ("names", "_wrapped", "_env", "compile")

    def __init__(self, filters: dict[str, Callable] | None = None):
        self._wrapped = {str(n): _user_filter(str(n), f) for n, f in (filters or {}).items()}
        self.names = tuple(sorted(self._wrapped))
        self._env = None
        self.compile = lru_cache(maxsize=1024)(self._compile)

    def __bool__(self) -> bool:
        return bool(self._wrapped)

    def __repr__(self) -> str:
        return f"Filters({', '.join(self.names)})"

    def env(self):
        if self._env is None:
            base = _env()
            env = base.overlay()
            env.filters = {**base.filters, **self._wrapped}  # (an overlay shares its parent's dict)
            self._env = env
        return self._env

    def _compile(self, template: str):
        return self.env().from_string(to_jinja(template))


_in_force: ContextVar[Filters | None] = ContextVar("factcli_filters", default=None)


@contextmanager
def filters_used(filters: Filters | None) -> Iterator[Callable[[Filters | None], None]]:
    """`with filters_used(suite.filters):` render with these custom filters (None: none) in this
    context, and tasks started in it, until the block ends; what was in force before is back after.
    Yields a function that changes them for the rest of the block (the loader: a config's filters
    are known only part way through its load)."""
    token = _in_force.set(filters)
    try:
        yield _in_force.set
    finally:
        _in_force.reset(token)


def _current_env():
    filters = _in_force.get()
    return filters.env() if filters else _env()


def filter_names() -> list[str]:
    """The filters a template rendered here can use: the built-ins and the custom ones in force."""
    return sorted(_current_env().filters)


# ---------------------------------------------------------------- rendering


def to_jinja(template: str) -> str:
    """Rewrite native `<<name>>` placeholders to Jinja; `\\<<` stays a literal `<<`."""
    if "<<" not in template:
        return template

    def sub(m: re.Match) -> str:
        if m.group(1):
            return m.group(0)[1:]
        return "{{ " + m.group(2) + " }}"

    return _NATIVE.sub(sub, template)


@lru_cache(maxsize=4096)
def _native_places(template: str) -> tuple[tuple[int, str], ...]:
    """(where, root name) of each `<<name>>` of a template that is a placeholder (not `\\<<`)."""
    return tuple((m.start(), re.match(r"[A-Za-z_]\w*", m.group(2)).group(0))
                 for m in _NATIVE.finditer(template) if not m.group(1))


def native_names(template: str) -> frozenset:
    """The root names a template reads through `<<name>>` placeholders."""
    return frozenset(name for _, name in _native_places(template)) if "<<" in template else frozenset()


@lru_cache(maxsize=4096)
def names_by_form(template: str) -> tuple[frozenset, frozenset] | None:
    """(names read through `{{ }}` or `{% %}`, names read only through `<<name>>`): an undefined name
    of the first kind renders empty, one of the second stays as written. None if it does not parse."""
    every = referenced_names(template)
    if every is None or "<<" not in template:
        return None if every is None else (every, frozenset())
    native = native_names(template)
    rest = referenced_names(_NATIVE.sub(lambda m: m.group(0) if m.group(1) else "", template)) or frozenset()
    return rest, native - rest


def _keep_undefined_native(template: str, variables: dict, missing: list | None) -> str:
    """An undefined `<<name>>` stays as written, as promptfoo sends it (contract §3): each one is
    escaped before rendering and noted in `missing` as `<<name>>` (its warning says it was kept)."""
    places = [(at, name) for at, name in _native_places(template) if name not in variables]
    if not places:
        return template
    out, last = [], 0
    for at, name in places:
        out.append(template[last:at])
        out.append("\\")
        last = at
        if missing is not None:
            missing.append(f"<<{name}>>")
    out.append(template[last:])
    return "".join(out)


def has_template(text: str) -> bool:
    return "{{" in text or "{%" in text or "{#" in text or "<<" in text


@lru_cache(maxsize=4096)
def _compile_plain(template: str):
    return _env().from_string(to_jinja(template))


def _compile(template: str):
    """The template compiled for the custom filters in force (those without custom filters share one cache)."""
    filters = _in_force.get()
    return filters.compile(template) if filters else _compile_plain(template)


@lru_cache(maxsize=4096)
def referenced_names(template: str) -> frozenset | None:
    """The root names a template reads (loop variables and `set` names excluded), parsed by the engine
    that renders it; None if it does not parse."""
    simple = _simple(template)
    if simple is not None:
        return frozenset(simple[1])
    from jinja2 import TemplateSyntaxError, meta

    try:
        return frozenset(meta.find_undeclared_variables(_env().parse(to_jinja(template))))
    except TemplateSyntaxError:
        return None
    except (RecursionError, MemoryError):
        return None


_NO_SUCH = re.compile(r"No (filter|test) named '([^']*)'(?: found)?\.?")


def _explain(message: str) -> str:
    """Jinja's wording, with a did-you-mean for an unknown filter or test."""
    m = _NO_SUCH.search(message)
    if not m:
        return message
    kind, word = m.group(1), m.group(2)
    env = _current_env()
    known = env.filters if kind == "filter" else env.tests
    hint = did_you_mean(word, [n for n in known if not n.startswith("_")])
    return f"unknown {kind} '{word}'{hint}"


def _compiled(template: str, name: str | None):
    from jinja2 import TemplateSyntaxError

    try:
        return _compile(template)
    except TemplateSyntaxError as exc:
        raise TemplateError(_explain(exc.message or "invalid syntax"), name=name, line=exc.lineno,
                            syntax=True) from None
    except (RecursionError, MemoryError):
        raise TemplateError("the template is nested too deeply", name=name, syntax=True) from None


def _template_line(exc: BaseException) -> int | None:
    """The template line a render error happened on (Jinja rewrites its traceback to template lines)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == _TEMPLATE_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _detail(exc: BaseException) -> str:
    from jinja2 import TemplateError as JinjaTemplateError

    if isinstance(exc, (_FilterFailed, JinjaTemplateError, ValueError)):
        return _explain(str(exc)) or type(exc).__name__
    if isinstance(exc, RecursionError):
        return "recursion too deep (a macro that calls itself?)"
    return f"{type(exc).__name__}: {exc}"


def check(template: str, name: str | None = None) -> None:
    """Raise TemplateError if the template does not parse (or names a filter that does not exist)."""
    if isinstance(template, str) and has_template(template) and _simple(template) is None:
        _compiled(template, name)  # (a template _simple reads is valid Jinja)


# `{{ name }}` and nothing else: no filter, attribute, whitespace control or Jinja constant
_SIMPLE_OUTPUT = re.compile(r"\{\{[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*\}\}")
_NOT_SIMPLE = frozenset(("true", "false", "none", "True", "False", "None", "self"))


@lru_cache(maxsize=4096)
def _simple(template: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """A template without control flow, as (literal pieces, names): `Answer: {{ q }}` renders as
    the pieces joined with each name's value printed by js_string (the environment's `finalize`),
    which is what Jinja's compiled template does for it, without Jinja's per-render set-up. None for
    anything else."""
    source = to_jinja(template)
    if "\r" in source:  # Jinja normalises line endings in the text
        return None
    pieces, names, at = [], [], 0
    for m in _SIMPLE_OUTPUT.finditer(source):
        pieces.append(source[at:m.start()])
        names.append(m.group(1))
        at = m.end()
    pieces.append(source[at:])
    if any(n in _NOT_SIMPLE for n in names) or any("{{" in p or "{%" in p or "{#" in p for p in pieces) \
            or any(p.endswith("{") for p in pieces[:-1]):
        return None
    return tuple(pieces), tuple(names)


# The most a template with control flow may render (a loop printing a large var many times): past it
# an error, not gigabytes. Each template function's own cap is jsvalues.MAX_TEXT.
OUTPUT_LIMIT = 256 * 2**20


def render(template: str, variables: dict, missing: list | None = None, *, name: str | None = None) -> str:
    """Render one template string. Names that were undefined are appended to `missing`.
    `name` (e.g. "prompt 'greeting'") is how a TemplateError names the template."""
    if not isinstance(template, str) or not has_template(template):
        return template
    if "<<" in template:
        template = _keep_undefined_native(template, variables, missing)
    simple = _simple(template)
    if simple is not None:
        pieces, names = simple
        out = [pieces[0]]
        for i, n in enumerate(names, 1):
            if n not in variables:
                break  # an undefined name: Jinja records it
            value = variables[n]
            out.append(value if type(value) is str else js_string(value))  # (js_string of a str is itself)
            out.append(pieces[i])
        else:
            return "".join(out)
    compiled = _compiled(template, name)
    token = _missing.set(missing if missing is not None else [])
    try:
        out, size = [], 0
        for piece in compiled.generate(variables):
            size += len(piece)
            if size > OUTPUT_LIMIT:  # (a loop printing a large var: each function's own cap is MAX_TEXT)
                raise TemplateError(f"renders more than {OUTPUT_LIMIT:,} characters", name=name)
            out.append(piece)
        return "".join(out)
    except TemplateError:
        raise
    except Exception as exc:  # noqa: BLE001 - a filter, a sandbox refusal or a type error in a user's template
        raise TemplateError(_detail(exc), name=name, line=_template_line(exc)) from None
    finally:
        _missing.reset(token)


def render_value(value: Any, variables: dict, *, name: str | None = None, missing: list | None = None) -> Any:
    """Render strings inside an assertion value (strings, lists, dicts) with the test vars; undefined
    names are appended to `missing`."""
    if isinstance(value, str):
        return render(value, variables, missing, name=name)
    if isinstance(value, list):
        return [render_value(v, variables, name=name, missing=missing) for v in value]
    if isinstance(value, dict):
        return {k: render_value(v, variables, name=name, missing=missing) for k, v in value.items()}
    return value
