"""Where a config value was read (file, base directory, prompt templates) and the checks that name
that place in their one-line errors: every loader in this package reports through these.

Unknown keys (contract §4): a key close to a known key of its level is a typo and an error with
"did you mean"; any other unknown key is recorded as a warning while a suite loads
(`unknown_keys_collected`), one line per key naming the file and the key path. Outside a suite load
(calibrate's own files) every unknown key stays an error."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factcli.errors import ConfigError, did_you_mean


def expect(cond: bool, msg: str, file: str, path: str) -> None:
    if not cond:
        raise ConfigError(msg, file, path)


def check_keys(obj: dict, allowed: set, file: str, path: str, unsupported: dict | None = None) -> None:
    """Keys of one level: known ones pass; promptfoo keys factcli refuses and near misses of a known
    key are errors; any other key is an unknown-key warning (an error outside a suite load)."""
    for key in obj:
        if not isinstance(key, str):
            raise ConfigError(f"keys must be strings, got {key!r}", file, path)
        if key in allowed:
            continue
        if unsupported and key in unsupported:
            raise ConfigError(f"'{key}' is not supported by factcli: {unsupported[key]}", file, join(path, key))
        if not key.strip():  # nothing anyone meant: an error like a typo
            raise ConfigError(f"unknown key '{key}'", file, join(path, key))
        close = near_miss(key, set(allowed) | set(unsupported or ()))
        if close:
            raise ConfigError(f"unknown key '{key}' (did you mean '{close}'?)", file, join(path, key))
        unknown_key(file, join(path, key), f"unknown key '{key}' (ignored)", key, allowed)


def check_method_keys(settings, typ: str, config: dict, file: str, path: str) -> None:
    """A claim-level method's `config` (methods/settings.MethodSettings), before any call: an older
    spelling is one warning naming the documented one (it still works), a near miss of a known key an
    error with "did you mean", any other key an unknown-key warning. Values are checked by the method."""
    for old, new in settings.renamed(config):
        load_warning(f"{file}: {typ} config.{old} is written config.{new} now (the old spelling still works)")
    for key in settings.unknown(config):
        close = near_miss(key, settings.names) if isinstance(key, str) else None
        if close:
            raise ConfigError(f"unknown key '{key}' (did you mean '{close}'?)", file, join(path, key))
        unknown_key(file, join(path, str(key)), f"unknown key '{key}' (ignored)", str(key), settings.names)


# ---------------------------------------------------------------- every problem at once

# The problems recorded while a config loads (one line each), when something is collecting them; None
# outside. A problem that leaves the rest of the config readable (an unknown assertion type, a provider
# or a prompt or test file that cannot be read) is recorded and the load goes on, so that one run of
# `factcli eval` names every one of them (issue 40); the rest still stop the load at once.
_PROBLEMS: ContextVar[list | None] = ContextVar("factcli_problems", default=None)
# Whether the outermost load leaves its problems on the suite (the eval flow, which adds the var and
# preflight checks' problems before reporting them all) rather than raising them itself.
_DEFERRED: ContextVar[bool] = ContextVar("factcli_problems_deferred", default=False)


def record(exc: ConfigError) -> bool:
    """Record `exc` as one of the load's problems; False when nothing collects them (then raise it)."""
    found = _PROBLEMS.get()
    if found is None:
        return False
    found.append(exc)
    return True


@contextmanager
def problems_collected() -> Iterator[list[ConfigError] | None]:
    """Collect the problems recorded inside; yields the list when this is the outermost collection
    (its owner reports them), None inside another one (whose owner does)."""
    if _PROBLEMS.get() is not None:
        yield None
        return
    found: list[ConfigError] = []
    token = _PROBLEMS.set(found)
    try:
        yield found
    except ConfigError as exc:
        if found:  # a problem that stopped the load, after others that did not: all of them
            from factcli.errors import ConfigProblems

            raise ConfigProblems([str(e) for e in found + [exc]]) from None
        raise
    finally:
        _PROBLEMS.reset(token)


def settle(found: list[ConfigError] | None, suite) -> None:
    """At the end of the outermost load: its problems go on the suite when the caller checks more
    before reporting them (problems_deferred), else they are raised now (one as itself)."""
    if not found:
        return
    if _DEFERRED.get():
        suite.problems = list(dict.fromkeys(str(e) for e in found))
        suite.problem_error = found[0] if len(found) == 1 else None  # raised as itself when it is the only one
        return
    if len(found) == 1:
        raise found[0]
    from factcli.errors import ConfigProblems

    raise ConfigProblems([str(e) for e in found])


@contextmanager
def problems_deferred() -> Iterator[None]:
    token = _DEFERRED.set(True)
    try:
        yield
    finally:
        _DEFERRED.reset(token)


# ---------------------------------------------------------------- unknown keys: typos and warnings

# (file, key path, message) of each unknown key met while a suite loads; None outside a load
_FOUND: ContextVar[list | None] = ContextVar("factcli_unknown_keys", default=None)


@contextmanager
def unknown_keys_collected() -> Iterator[list[tuple[str, str, str]]]:
    """Record unknown keys instead of refusing them; yields the list they are recorded in."""
    found: list[tuple[str, str, str]] = []
    token = _FOUND.set(found)
    try:
        yield found
    finally:
        _FOUND.reset(token)


def unknown_key(file: str, where: str, message: str, key: str = "", known=()) -> None:
    """One ignored key: a warning while a suite loads, else the error it always was."""
    found = _FOUND.get()
    if found is None:
        raise ConfigError(f"unknown key '{key}'{did_you_mean(key, known)}" if key else message, file, where)
    found.append((file, where, message))


# the warnings of a suite's test files (a CSV column that looks like a misspelt special one) while it loads
_SAID: ContextVar[list | None] = ContextVar("factcli_load_warnings", default=None)


@contextmanager
def load_warnings_collected() -> Iterator[list[str]]:
    """Collect the warnings `load_warning` gives while a suite loads; they join the suite's warnings,
    which the flow's UI tells (the CLI on stderr, `evaluate()` as FactcliWarnings)."""
    said: list[str] = []
    token = _SAID.set(said)
    try:
        yield said
    finally:
        _SAID.reset(token)


def load_warning(message: str) -> None:
    """A warning about the config being loaded: the suite's (see load_warnings_collected); outside a
    suite load, said on stderr."""
    said = _SAID.get()
    if said is None:
        import sys

        print(f"warning: {message}", file=sys.stderr)
    elif message not in said:
        said.append(message)


def unknown_key_lines(found: list[tuple[str, str, str]]) -> list[str]:
    """One line per unknown key; the same key in many tests of one file is one line ("and N more"),
    so a 1,000-test file with one stray column does not bury the run under 1,000 warnings."""
    groups: dict[tuple, list[str]] = {}
    for file, where, message in found:
        paths = groups.setdefault((file, re.sub(r"\[\d+\]", "[]", where), message), [])
        if where not in paths:
            paths.append(where)
    lines = []
    for (file, _, message), paths in groups.items():
        more = f" (and {len(paths) - 1} more like it)" if len(paths) > 1 else ""
        lines.append(f"{file}: {paths[0]}{more}: {message}")
    return lines


def near_miss(key: str, known) -> str | None:
    """The known key `key` is a typo of, if any: the same letters but for case, `_`/`-`, or a small edit
    distance for its length (0 for 1-2 letters, 1 for 3-5, 2 for longer). Wider than that, a key is
    a key of its own (promptfoo's `outputs:` is not `outputPath`)."""
    k = _fold(key)
    best, best_d = None, 3
    for cand in known:
        if not isinstance(cand, str) or cand == key:
            continue
        c = _fold(cand)
        if c == k:
            return cand
        n = min(len(c), len(k))
        limit = 0 if n <= 2 else 1 if n <= 5 else 2
        if abs(len(c) - len(k)) > limit:
            continue
        d = _distance(k, c)
        if d <= limit and (d, cand) < (best_d, best or ""):
            best, best_d = cand, d
    return best


def _fold(key: str) -> str:
    return key.lower().replace("-", "").replace("_", "")


def _distance(a: str, b: str) -> int:
    """Edit distance counting a swap of two neighbours as one edit (optimal string alignment)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


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
        raise ConfigError(f"expected a number, got {value!r}{percent_hint(value)}", file, path)
    return value


def percent_hint(value: Any) -> str:
    """" (did you mean 0.8?)" for a percentage written where a config takes a fraction (`80%`): the
    percent form is the command line's alone (`--gate 'pass-rate>=80%'`); a config's numbers are numbers."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            return f" (did you mean {float(value.strip()[:-1]) / 100:g}?)"
        except ValueError:
            return ""
    return ""


def unit_range(value: float, file: str, path: str, what: str) -> None:
    """A threshold or a gate's bound on a score between 0 and 1: one outside it can never be met, or is
    always met (`threshold: 80` where 0.8 was meant fails every row); refused with the fraction it may mean."""
    if 0 <= value <= 1:
        return
    hint = f"; did you mean {value / 100:g}?" if 1 < value <= 100 else ""
    raise ConfigError(f"{what} is between 0 and 1, got {value:g}{hint}", file, path)


def read_label(value: Any, file: str, path: str) -> str | None:
    """A display label: a string, or a number or a boolean written bare in YAML (`label: 4`), read as
    its text; anything else cannot name a column."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"  # YAML's spelling, as the user wrote it
    if isinstance(value, (int, float)):
        return str(value)
    raise ConfigError(f"expected a label (a string), got {type(value).__name__}", file, path)


def given(value: Any, empty: Any) -> Any:
    """A config value, or `empty` when it is left out: absent, null, or an empty text, list or mapping.
    A `false` or a `0` is a value like any other, checked by the caller (never read as left out)."""
    return empty if value is None or (isinstance(value, (str, list, dict)) and not value) else value


def as_list(value: Any) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


@dataclass
class Ctx:
    """Where a value is read from while a config loads: its file, the folder its paths are relative to, and
    the config's assertionTemplates (`$ref` targets)."""

    file: str
    base: Path
    templates: dict
