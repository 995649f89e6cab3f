"""The one reader of the claim-level methods' `config:` settings.

Each method declares its keys once (`MethodSettings`): the documented spelling, promptfoo's camelCase;
the older spellings still accepted (snake_case, and `concurrency` for `maxConcurrency`); and the
check of the value. Two readers use the declaration:

- the config loader (config/testcases.py) names, before any call, each older spelling once with its
  documented one (a warning) and each unknown key (a near miss of a known key is an error with a
  "did you mean", as every other config level has it);
- the method's handler (`read`) gets the given values under their documented names, each checked:
  a wrong value is one error naming the key as written, what it must be and what it got.

Defaults stay with each method (some depend on `profile: reference`), but for `maxConcurrency`, which every
method that has it declares and reads here (`max_concurrency`, `concurrency`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from factcli.scoring.registry import AssertionError_


class Bad(ValueError):
    """A value a check refuses; its text completes "config.<key> must be …"."""


@dataclass(frozen=True)
class Setting:
    name: str  # the documented spelling
    check: Callable[[Any], Any]  # the value as the method uses it, or Bad
    old: tuple[str, ...] = ()  # older spellings, accepted with a warning


# ---------------------------------------------------------------- checks


def whole(minimum: int = 1) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < minimum:
            raise Bad(f"a whole number ≥ {minimum}")
        return int(value)

    return check


def number(low: float, high: float = math.inf, low_open: bool = False, say: str = "") -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or value > high or value < low or (low_open and value == low)):
            raise Bad(say or (f"a number in [{low:g}, {high:g}]" if high != math.inf
                              else f"a number {'>' if low_open else '≥'} {low:g}"))
        return float(value)

    return check


def flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Bad("true or false")
    return value


def choice(*allowed: str, say: str = "", fold: Callable[[str], str] = str.lower) -> Callable[[Any], str]:
    """One of `allowed`, compared after `fold` (lower case by default)."""

    def check(value: Any) -> str:
        text = fold(str(value).strip())
        if text not in allowed:
            raise Bad(say or f"one of {', '.join(allowed)}")
        return text

    return check


def strings(value: Any) -> list[str]:
    """A list of strings (one string is a list of one)."""
    value = [value] if isinstance(value, str) else value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Bad("a list of strings")
    return value


def text(value: Any) -> str:
    if not isinstance(value, str):
        raise Bad("a string")
    return value


def mapping(value: Any) -> dict:
    if not isinstance(value, dict):
        raise Bad("a mapping")
    return value


def anything(value: Any) -> Any:
    return value


# `default` (factcli's choices) or `reference` (the reference implementation's algorithm, defaults, calls
# and parsing; docs/claim-methods.md lists what changes)
PROFILE = Setting("profile", choice("default", "reference", say="default or reference"))
# A method's own limit on its grader calls in flight for one assertion (`config.maxConcurrency`): none by
# default, so the run's cap (-j) alone bounds them (scoring/gather.bound). Declared once for every method.
DEFAULT_CONCURRENCY = None


def max_concurrency(*older: str) -> Setting:
    """The `maxConcurrency` setting of a method (`concurrency` the older spelling, plus the method's own)."""
    return Setting("maxConcurrency", whole(1), ("concurrency", *older))


def concurrency(given: dict) -> int | None:
    """A method's own limit from its read settings (`MethodSettings.read`), else the default."""
    return given.get("maxConcurrency", DEFAULT_CONCURRENCY)


# read by the judge panel, the calibration and the scorer for every model-graded type
SHARED = frozenset(("models", "calibration", "aggregate"))


class MethodSettings:
    """The keys of one method's `config`; `prompts` are its step prompts' keys (read by claims.prompt_for)."""

    def __init__(self, method: str, *settings: Setting, prompts: tuple[str, ...] = (), profile: bool = True):
        self.method = method
        self.by_name = {s.name: s for s in ((PROFILE,) if profile else ()) + settings}
        self.renames = {old: s.name for s in settings for old in s.old}
        self.names = frozenset(self.by_name) | SHARED | frozenset(prompts)

    def renamed(self, cfg: dict) -> list[tuple[str, str]]:
        """(older spelling, documented spelling) of each key written the old way."""
        return [(key, self.renames[key]) for key in cfg if key in self.renames]

    def unknown(self, cfg: dict) -> list[str]:
        return [key for key in cfg if key not in self.names and key not in self.renames]

    def read(self, cfg: dict | None) -> dict:
        """The given settings under their documented names, each checked (AssertionError_ naming the key
        as written); a key given as null counts as not given. When both spellings are given, the
        documented one wins."""
        out: dict = {}
        for key, value in (cfg or {}).items():
            name = self.renames.get(key, key)
            setting = self.by_name.get(name)
            if setting is None or value is None or (name != key and cfg.get(name) is not None):
                continue
            try:
                out[name] = setting.check(value)
            except Bad as exc:
                raise AssertionError_(f"{self.method}: config.{key} must be {exc}, got {value!r}") from None
        return out
