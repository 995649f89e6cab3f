"""The Jinja2 sandbox made to behave like promptfoo's Nunjucks.

Jinja2 parses the template; before code generation the syntax tree is rewritten so that
conditions use JavaScript truthiness, `and`/`or` return an operand as JavaScript does, `==` is
loose, `~` prints values the JavaScript way and `for` iterates as Nunjucks does (two loop
variables over an object give its keys and values; one over an object gives nothing). The
sandbox's operator hooks give `+ - * / // % **` JavaScript semantics, and attribute lookups
prefer an object's keys and know JavaScript's `length` and common string/array methods.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from typing import Any

from jinja2 import ChainableUndefined, Undefined, nodes
from jinja2.compiler import CodeGenerator
from jinja2.sandbox import ImmutableSandboxedEnvironment

from factcli.templating import jsvalues as js

js.Undefined = Undefined  # jsvalues reads it as JavaScript's `undefined` once Jinja is loaded (its docstring)

# ---------------------------------------------------------------- syntax tree rewrite
#
# Jinja2 forbids custom node types, so each Nunjucks construct becomes a call of an environment
# method (`environment.js_truthy(x)`); calls are never folded at compile time with Python's rules.


def _env_call(method: str, args: list, lineno: int) -> nodes.Call:
    return nodes.Call(nodes.EnvironmentAttribute(method, lineno=lineno), args, [], None, None, lineno=lineno)


def _truthy(node: nodes.Expr | None) -> nodes.Expr | None:
    if node is None:
        return None
    return _env_call("js_truthy", [node], node.lineno)


def _rewrite(node: nodes.Node) -> nodes.Node:
    """Replace, bottom-up, every node whose meaning differs between Jinja2 and Nunjucks."""
    for field in node.fields:
        value = getattr(node, field, None)
        if isinstance(value, nodes.Node):
            setattr(node, field, _rewrite(value))
        elif isinstance(value, list):
            setattr(node, field, [_rewrite(v) if isinstance(v, nodes.Node) else v for v in value])
    line = node.lineno
    if isinstance(node, (nodes.If, nodes.CondExpr)):
        node.test = _truthy(node.test)
    elif isinstance(node, nodes.For):
        targets = len(node.target.items) if isinstance(node.target, nodes.Tuple) else 1
        node.iter = _env_call("js_iter", [node.iter, nodes.Const(targets, lineno=line)], line)
        node.test = _truthy(node.test)
    elif isinstance(node, nodes.Not):
        node.node = _truthy(node.node)
    elif isinstance(node, (nodes.And, nodes.Or)):
        node.left = _env_call("js_value", [node.left], line)  # keeps Python's folding away
    elif isinstance(node, nodes.Compare):
        args = [node.expr]
        for op in node.ops:
            args += [nodes.Const(op.op, lineno=line), op.expr]
        return _env_call("js_compare", args, line)
    elif isinstance(node, nodes.Concat):
        return _env_call("js_concat", node.nodes, line)
    return node


class JsCodeGenerator(CodeGenerator):
    """`and`/`or` as JavaScript's `&&`/`||`: short-circuit, returning an operand."""

    def _short_circuit(self, name: str, node: nodes.BinExpr, frame) -> None:
        self.write(f"environment.{name}(")
        self.visit(node.left, frame)
        self.write(", lambda: ")
        self.visit(node.right, frame)
        self.write(")")

    def visit_And(self, node: nodes.And, frame) -> None:
        self._short_circuit("js_and", node, frame)

    def visit_Or(self, node: nodes.Or, frame) -> None:
        self._short_circuit("js_or", node, frame)


# ---------------------------------------------------------------- JavaScript members


def _index(value: Any) -> int | None:
    """An array index from an int, an integral float or a canonical digit string; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.isdigit() and value.isascii() and (value == "0" or value[0] != "0"):
        return int(value)
    return None


def _split(s: str, sep: Any = None, limit: Any = None) -> list[str]:
    if sep is None or js.is_undefined(sep):
        parts = [s]
    else:
        sep = js.js_string(sep)
        parts = list(s) if sep == "" else s.split(sep)
    if limit is not None and not js.is_undefined(limit):
        parts = parts[: max(0, int(js.to_number(limit)))]
    return parts


def _rel(pos: Any, n: int) -> int:
    """A JavaScript slice bound: negative counts from the end, clamped to 0..n."""
    p = js.to_number(pos)
    p = 0 if js.isnan(p) else int(max(-n - 1, min(n + 1, p)))
    return max(0, n + p) if p < 0 else min(p, n)


def _slice(seq, start: Any = 0, end: Any = None):
    n = len(seq)
    a = _rel(start, n)
    b = n if end is None or js.is_undefined(end) else _rel(end, n)
    return seq[a:b] if a < b else seq[:0]


def _substring(s: str, start: Any = 0, end: Any = None) -> str:
    n = len(s)

    def clamp(x: Any) -> int:
        v = js.to_number(x)
        return 0 if js.isnan(v) else int(max(0, min(n, v)))

    a, b = clamp(start), n if end is None or js.is_undefined(end) else clamp(end)
    return s[min(a, b):max(a, b)]


def _repeat(s: str, count: Any) -> str:
    n = int(js.to_number(count))
    if n < 0 or len(s) * n > js.MAX_TEXT:
        raise ValueError("Invalid count value for repeat")
    return s * n


def _pad(s: str, length: Any, fill: Any, start: bool, what: str) -> str:
    """String.prototype.padStart/padEnd: the fill string repeated and cut to the length."""
    n = js.to_number(length)
    n = 0 if js.isnan(n) else n
    fill = " " if js.is_undefined(fill) else js.js_string(fill)
    if n <= len(s) or fill == "":
        return s
    js.check_text_size(n - len(s), what)
    n = int(n)
    pad = (fill * ((n - len(s)) // len(fill) + 1))[:n - len(s)]
    return pad + s if start else s + pad


def _replace(s: str, old: Any, new: Any, count: int) -> str:
    old, new = js.js_string(old), js.js_string(new)
    if len(new) > len(old):
        found = (len(s) + 1 if old == "" else s.count(old)) if count < 0 else 1
        js.check_text_size(found * (len(new) - len(old)), "replace")
    return s.replace(old, new, count)




def _index_of(seq, item: Any, start: Any = 0) -> int:
    begin = _rel(start, len(seq))
    if isinstance(seq, str):
        return seq.find(js.js_string(item), begin)
    for i in range(begin, len(seq)):
        if js.strict_eq(seq[i], item):
            return i
    return -1


def _string_member(s: str, name: str) -> Any:
    methods = {
        "toUpperCase": lambda: s.upper(),
        "toLowerCase": lambda: s.lower(),
        "trim": lambda: s.strip(),
        "trimStart": lambda: s.lstrip(),
        "trimEnd": lambda: s.rstrip(),
        "split": lambda sep=None, limit=None: _split(s, sep, limit),
        "includes": lambda sub, pos=0: js.js_string(sub) in s[_rel(pos, len(s)):],
        "startsWith": lambda sub, pos=0: s.startswith(js.js_string(sub), _rel(pos, len(s))),
        "endsWith": lambda sub, end=None: s[: len(s) if end is None else _rel(end, len(s))].endswith(
            js.js_string(sub)),
        "indexOf": lambda sub, pos=0: _index_of(s, sub, pos),
        "lastIndexOf": lambda sub: s.rfind(js.js_string(sub)),
        "slice": lambda start=0, end=None: _slice(s, start, end),
        "substring": lambda start=0, end=None: _substring(s, start, end),
        "charAt": lambda i=0: s[int(js.to_number(i))] if 0 <= js.to_number(i) < len(s) else "",
        "replace": lambda old, new: _replace(s, old, new, 1),
        "replaceAll": lambda old, new: _replace(s, old, new, -1),
        "concat": lambda *more: s + "".join(js.js_string(x) for x in more),
        "repeat": lambda n: _repeat(s, n),
        "padStart": lambda n, fill=" ": _pad(s, n, fill, True, "padStart"),
        "padEnd": lambda n, fill=" ": _pad(s, n, fill, False, "padEnd"),
    }
    return methods.get(name, _NO_MEMBER)


def _array_member(seq, name: str) -> Any:
    methods = {
        "join": lambda sep=",": (js.js_string(sep) if not js.is_undefined(sep) else ",").join(
            js.js_string(v) for v in seq),
        "includes": lambda item: any(js.strict_eq(v, item) for v in seq),
        "indexOf": lambda item, start=0: _index_of(seq, item, start),
        "slice": lambda start=0, end=None: list(_slice(list(seq), start, end)),
        "concat": lambda *more: list(seq) + [x for m in more for x in (m if js.is_array(m) else [m])],
    }
    return methods.get(name, _NO_MEMBER)


_NO_MEMBER = object()


def js_member(obj: Any, name: str) -> Any:
    """`s.length`, `arr.length` and the common string and array methods; _NO_MEMBER otherwise."""
    if isinstance(obj, str):
        return len(obj) if name == "length" else _string_member(str(obj), name)
    if isinstance(obj, (list, tuple)):
        return len(obj) if name == "length" else _array_member(obj, name)
    return _NO_MEMBER


# ---------------------------------------------------------------- the environment


class NunjucksEnvironment(ImmutableSandboxedEnvironment):
    """Sandboxed (no private attributes, no mutation of vars) with Nunjucks' semantics."""

    code_generator_class = JsCodeGenerator
    intercepted_binops = frozenset(["+", "-", "*", "/", "//", "%", "**"])
    intercepted_unops = frozenset(["+", "-"])

    def _parse(self, source, name, filename):
        return _rewrite(super()._parse(source, name, filename))

    # operators and conditions, called from the generated code
    def call_binop(self, context, operator, left, right):
        return js.binop(operator, left, right)

    def call_unop(self, context, operator, arg):
        return js.unop(operator, arg)

    @staticmethod
    def js_value(value: Any) -> Any:
        return value

    @staticmethod
    def js_truthy(value: Any) -> bool:
        return js.truthy(value)

    @staticmethod
    def js_and(left: Any, right) -> Any:
        return right() if js.truthy(left) else left

    @staticmethod
    def js_or(left: Any, right) -> Any:
        return left if js.truthy(left) else right()

    @staticmethod
    def js_compare(value: Any, *ops_and_values: Any) -> Any:
        for i in range(0, len(ops_and_values), 2):
            value = js.compare(ops_and_values[i], value, ops_and_values[i + 1])
        return value

    @staticmethod
    def js_concat(*values: Any) -> str:
        return "".join(js.js_string(v) for v in values)

    def js_iter(self, value: Any, targets: int) -> list:
        """What a Nunjucks `for` walks: `fromIterator`, then an array's items (unpacked by index
        for several loop variables) or, with two loop variables, an object's [key, value] pairs."""
        if js.is_undefined(value):
            list(value)  # records the undefined name
            return []
        if not js.truthy(value) or isinstance(value, (bool, int, float)):
            return []
        if not isinstance(value, (str, list, tuple, dict)):
            try:
                value = list(value)  # generators, ranges, Jinja's own sequences
            except TypeError:
                return []
        if targets == 1:
            return [] if isinstance(value, dict) else list(value)
        if isinstance(value, (list, tuple)):
            return [tuple(self._item(item, u) for u in range(targets)) for item in value]
        pad = (self.undefined(),) * (targets - 2)
        if isinstance(value, str):
            return [(str(i), ch, *pad) for i, ch in enumerate(value)]
        return [(key, value[key], *pad) for key in js.js_keys(value)]

    def _item(self, item: Any, index: int) -> Any:
        """item[index] as JavaScript reads it: an element, a character, a key "0", or undefined."""
        if isinstance(item, (str, list, tuple)):
            return item[index] if index < len(item) else self.undefined()
        if isinstance(item, dict):
            for key in (str(index), index):
                if key in item:
                    return item[key]
        return self.undefined()

    # lookups: an object's own keys first, then JavaScript members, then (safe) Python attributes
    def getattr(self, obj: Any, attribute: str) -> Any:
        if js.is_undefined(obj):
            return obj  # `missing.a.b` stays the undefined `missing`, so the warning names the var
        if obj is None:
            return self.undefined(obj=obj, name=attribute)
        if isinstance(obj, dict):
            if attribute in obj:
                return obj[attribute]
            n = _index(attribute)
            if n is not None and n in obj:
                return obj[n]
        member = js_member(obj, attribute)
        if member is not _NO_MEMBER:
            return member
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if js.is_undefined(obj):
            return obj
        if obj is None:
            return self.undefined(obj=obj, name=argument)
        if isinstance(argument, slice):  # Jinja2's s[1:3] (a syntax error in Nunjucks)
            return super().getitem(obj, argument)
        if isinstance(obj, (str, list, tuple)):
            n = _index(argument)
            if n is not None:
                return obj[n] if 0 <= n < len(obj) else self.undefined(obj=obj, name=argument)
            if isinstance(argument, str):
                return self.getattr(obj, argument)
            return self.undefined(obj=obj, name=argument)
        if isinstance(obj, dict):
            if not isinstance(argument, (dict, list)) and argument in obj:
                return obj[argument]
            alt = js.js_string(argument) if not isinstance(argument, str) else _index(argument)
            if alt is not None and alt in obj:
                return obj[alt]
            return self.undefined(obj=obj, name=argument)
        return super().getitem(obj, argument)


class _Environ:
    """`{{ env.NAME }}`: reads os.environ when used, so rendering never copies the environment."""

    def __getattr__(self, name: str) -> str:
        return os.environ.get(name, "")

    def __getitem__(self, name: str) -> str:
        return os.environ.get(name, "")

    def get(self, name: str, default: str = "") -> str:
        return os.environ.get(name, default)


def make_env(missing: ContextVar) -> NunjucksEnvironment:
    """The environment templating/__init__.py renders with: an undefined name renders as '' (as
    promptfoo's nunjucks does) and is appended to the list `missing` holds while a template renders."""
    from factcli.templating.filters import FILTERS, TESTS

    class RecordingUndefined(ChainableUndefined):
        def _record(self) -> None:
            names = missing.get()
            if names is not None and self._undefined_name is not None:
                names.append(self._undefined_name)

        def __str__(self) -> str:
            self._record()
            return ""

        def __iter__(self):
            self._record()
            return iter(())

    env = NunjucksEnvironment(undefined=RecordingUndefined, autoescape=False, keep_trailing_newline=True,
                              finalize=js.js_string)
    env.filters.update(FILTERS)
    env.tests.update(TESTS)
    env.globals["env"] = _Environ()
    return env
