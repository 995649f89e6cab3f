"""What a config would do, read from its raw mapping without loading it (loading imports code): the
code it would run, the files and URLs it would read, the endpoints that would receive a credential,
the paths it would write and the env vars it sets or its templates read.

The walk follows the config-key table (config/keys.py), so that a key the loader reads is a key the
walk knows the kind of; whether a value is a file reference or inline code is the loader's own rule
(sources.is_file_ref), so inline code whose text happens to end in `.py` is code here too.

A resumed run whose config is not the user's own (run/recording/trust.py) lists these and is refused without
`--trust-stored-config` (docs/team.md, "What a shared store trusts").
"""

from __future__ import annotations

import re
from typing import Any

from factcli import sources
from factcli.config.keys import LEVELS, LIST, MAP, Key, Kind

CODE, READ, SENDS, POSTS, WRITES, ENV = ("runs code", "reads", "sends your credential to", "sends outputs and vars to",
                                        "writes", "env")
_URL = re.compile(r"^(?:https?|huggingface|hf)://", re.IGNORECASE)
_BLOCK = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
_ENV_NAME = re.compile(r"\benv\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*['\"]([^'\"]+)['\"]\s*\])|\benv\b")
_DOLLAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def what_it_would_do(config: Any, where: str = "", level: str = "top") -> list[str]:
    """One line per thing `config` (a raw config mapping) would do that needs its author's trust:
    '<what>: <key path>: <detail>'. Empty for a config of plain data."""
    found: list[str] = []
    _Walk(found).level(config, where, level)
    return list(dict.fromkeys(found))


def option_would_do(level: str, key: str, value: Any, where: str) -> list[str]:
    """what_it_would_do for one key's value alone (a stored --var, --providers or --grader)."""
    found: list[str] = []
    _Walk(found).value(LEVELS[level][key], value, where, {}, level, key)
    return list(dict.fromkeys(found))


def first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    first = first if len(first) <= 200 else first[:199] + "…"
    return first + (f" (+{len(lines) - 1} lines)" if len(lines) > 1 else "")


def env_reads(text: str) -> list[str]:
    """The env vars a template reads: `{{ env.X }}`, `{{ env['X'] }}`, `${X}`; '*' for the whole `env`."""
    names = [m.group(1) for m in _DOLLAR.finditer(text)]
    for block in _BLOCK.findall(text):
        names += [m.group(1) or m.group(2) or "*" for m in _ENV_NAME.finditer(block)]
    return list(dict.fromkeys(names))


def _join(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


class _Walk:
    def __init__(self, found: list[str]):
        self.found = found

    def add(self, what: str, where: str, detail: str) -> None:
        self.found.append(f"{what}: {where or '(top)'}: {detail}")

    def level(self, node: Any, where: str, level: str) -> None:
        if not isinstance(node, dict):
            return self.data(node, where)
        if level == "test" and "path" in node:  # a tests: item {path: file://gen.py:fn} (config/testsets)
            level = "testGenerator"
        if level == "provider" and "id" not in node and len(node) == 1:  # legacy {provider-id: {config}}
            (pid, opts), = node.items()
            self.provider(pid, _join(where, pid))
            return self.level(opts, _join(where, pid), "provider") if isinstance(opts, dict) else None
        keys = LEVELS[level]
        for key, value in node.items():
            spec = keys.get(key)
            if spec is None:  # the loader ignores it (an unknown-key warning), but a template in it is still read
                self.data(value, _join(where, key))
                continue
            self.value(spec, value, _join(where, key), node, level, key)

    def value(self, spec: Key, value: Any, where: str, parent: dict, level: str, key: str) -> None:
        if spec.shape in (LIST, MAP) or isinstance(value, list):
            if isinstance(value, dict) and spec.shape == MAP:
                for k, v in value.items():
                    self.one(spec, v, _join(where, k), parent, level, key)
                return
            if isinstance(value, list):
                for i, v in enumerate(value):
                    self.one(spec, v, f"{where}[{i}]", parent, level, key)
                return
        self.one(spec, value, where, parent, level, key)

    def one(self, spec: Key, value: Any, where: str, parent: dict, level: str, key: str) -> None:
        if isinstance(value, list) and not spec.level:  # (a var's list of values)
            for i, v in enumerate(value):
                self.one(spec, v, f"{where}[{i}]", parent, level, key)
            return
        if isinstance(value, dict) and spec.level:
            return self.level(value, where, spec.level)
        if spec.kind is Kind.ENV and spec.shape == MAP:  # an `env:` block: the names it sets
            self.add(ENV, where, f"sets {where.rsplit('.', 1)[-1]}")
            return self.data(value, where)
        if not isinstance(value, str):
            return self.data(value, where)
        text = value.strip()
        for name in env_reads(value):
            self.add(ENV, where, "reads every env var ({{ env }})" if name == "*" else f"reads {name}")
        kind = spec.kind
        if spec.script_value and level == "assert" and str(parent.get("type")).removeprefix("not-") == "webhook":
            return self.add(POSTS, where, text)  # an outside judge (assertions/operational.py)
        if spec.script_value:
            kind = Kind.CODE if _script(parent, level, value) else (Kind.DATA if level == "derivedMetric" else kind)
        if kind is Kind.CODE:
            if sources.is_file_ref(text) or spec.file:
                self.add(CODE, where, f"code file {text}")
            else:
                kind_of = str(parent.get("type")).removeprefix("not-")
                what = (f"{kind_of} assertion" if level == "assert" and key == "value"
                        else "javascript derived metric" if level == "derivedMetric" else key)
                self.add(CODE, where, f"inline {what}: {first_line(value)}")
        elif kind is Kind.READ:
            self.read(text, where, spec)
        elif kind is Kind.PROVIDER:
            self.provider(text, where, spec)
        elif kind is Kind.ENDPOINT:
            self.add(SENDS, where, text)
        elif kind is Kind.WRITE:
            self.add(WRITES, where, text)
        elif kind is Kind.ENV:
            self.add(ENV, where, f"reads {text}")

    def read(self, text: str, where: str, spec: Key) -> None:
        holds = " (more config: it may hold code)" if spec.more_config else ""
        if sources.is_file_ref(text) or (spec.file and text):
            if _script_file(text):
                self.add(CODE, where, f"code file {text}")
            else:
                self.add(READ, where, f"{text}{holds}")
        elif _URL.match(text):
            self.add(READ, where, f"{text}{holds}")

    def provider(self, pid: Any, where: str, spec: Key | None = None) -> None:
        if not isinstance(pid, str):
            return self.data(pid, where)
        if sources.is_file_ref(pid) and not _script_file(pid):
            self.read(pid, where, spec or Key(Kind.READ, more_config=True))
        elif runs_user_code(pid):
            self.add(CODE, where, f"provider {first_line(pid)}")
        elif _URL.match(pid.strip()):
            self.add(SENDS, where, pid.strip())

    def data(self, value: Any, where: str) -> None:
        """Data: only the env vars its templates read."""
        if isinstance(value, str):
            for name in env_reads(value):
                self.add(ENV, where, "reads every env var ({{ env }})" if name == "*" else f"reads {name}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.data(v, f"{where}[{i}]")
        elif isinstance(value, dict):
            for k, v in value.items():
                self.data(v, _join(where, k))


def _script(parent: dict, level: str, value: str) -> bool:
    """Whether a `script_value` key holds code: an assertion's value when its type is a script
    (scoring/registry.CODE), a derived metric's when it reads as JavaScript (scoring/metrics)."""
    if level == "derivedMetric":
        from factcli.scoring.metrics import is_javascript

        return is_javascript(value)
    from factcli.scoring.registry import CODE as SCRIPT_TYPES

    kind = parent.get("type")
    return isinstance(kind, str) and kind.removeprefix("not-") in SCRIPT_TYPES


def _script_file(ref: str) -> bool:
    from pathlib import Path

    path, _ = sources.ref_path(ref if sources.is_file_ref(ref) else "file://" + ref, Path("."))
    return path.suffix.lower() in sources.SCRIPT_SUFFIXES


def runs_user_code(pid: str) -> bool:
    """The registry's rule: the class that serves `pid` runs the user's code (providers/script.py)."""
    from factcli.providers.registry import provider_class

    try:
        return bool(getattr(provider_class(pid.strip()), "user_code", False))
    except Exception:  # an id no provider takes: the loader refuses it, nothing runs
        return False
