"""Where a config value was read (file, base directory, prompt templates) and the checks that name
that place in their one-line errors: every loader in this package reports through these."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factcli.errors import ConfigError, did_you_mean


def expect(cond: bool, msg: str, file: str, path: str) -> None:
    if not cond:
        raise ConfigError(msg, file, path)


def check_keys(obj: dict, allowed: set, file: str, path: str, unsupported: dict | None = None) -> None:
    for key in obj:
        if not isinstance(key, str):
            raise ConfigError(f"keys must be strings, got {key!r}", file, path)
        if unsupported and key in unsupported:
            raise ConfigError(f"'{key}' is not supported by factcli: {unsupported[key]}", file, join(path, key))
        if key not in allowed:
            raise ConfigError(f"unknown key '{key}'{did_you_mean(key, allowed)}", file, join(path, key))


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def number(value: Any, file: str, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"expected a number, got {value!r}", file, path)
    return value


def as_list(value: Any) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


@dataclass
class Ctx:
    file: str
    base: Path
    templates: dict
