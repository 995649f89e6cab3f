"""Vars checked before any call: a name a prompt or an assertion value uses that no test defines.

A near miss of a var that exists (`{{questoin}}` where the tests have `question`) is an error before
anything is sent, with a did-you-mean: every row would otherwise be paid for with an empty
placeholder. Any other unknown name is a warning, printed before the first call and by --dry-run
(it may be meant to render empty, or come from code the check cannot see). Names that code may add
while the run goes (transformVars, a beforeAll hook, storeOutputAs registers, conversations) are
known, or make the check keep to warnings.
"""

from __future__ import annotations

import difflib
from typing import Any

from factcli import templating
from factcli.errors import ConfigError, ConfigProblems
from factcli.types import walk

# names every template can read without a test defining them
ALWAYS = frozenset({"env", "_conversation", "__evalId", "__evalStepId", "__repeatIndex"})


def _names(value: Any) -> set[str]:
    """The var names a value's templates read: `name` for `{{ name }}`, `<<name>>` for a name read
    only through `<<name>>` (undefined, it stays as written rather than rendering empty)."""
    if isinstance(value, str):
        if not templating.has_template(value) or value.startswith("file://"):
            return set()
        forms = templating.names_by_form(value)
        return set() if forms is None else set(forms[0]) | {f"<<{n}>>" for n in forms[1]}
    if isinstance(value, list):
        return set().union(*(_names(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(_names(v) for v in value.values())) if value else set()
    return set()


def _assertions(test):
    """(index of the test's assertion, it or a member of its set)."""
    for i, top in enumerate(test.assertions):
        for a in walk([top]):
            yield i, a


def _used_names(test) -> list[tuple[int, str]]:
    """(index of the assertion, name) of every var name the test's assertion values use."""
    for a in test.assertions:  # most values (a CSV's __expected cells): text without a template, no set
        if a.children or type(a.value) is not str or templating.has_template(a.value):
            return [(i, name) for i, a in _assertions(test) for name in sorted(_names(a.value))]
    return []


def _close(name: str, known: set[str]) -> str | None:
    if name.lower() in {k.lower() for k in known}:
        return next(k for k in known if k.lower() == name.lower())
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
    return close[0] if close else None


class TestVars:
    """What the check needs from the tests, gathered a test at a time (by check_vars, or by the
    loader's one pass over a streamed suite, config/stream.py): the names they define, whether code
    may add names, and per name an assertion value uses, where first and how many times."""

    def __init__(self):
        self.known: set[str] = set()
        self.dynamic = False
        self.uses: dict[str, list] = {}  # name -> [where first, how many places]
        self._last: tuple = (None, ())  # (the assertions list, its [(index, name)]): shared by many tests

    def add(self, t: int, test) -> None:
        self.known.update(test.vars or {})
        options = test.options or {}
        if options.get("storeOutputAs"):
            self.known.add(str(options["storeOutputAs"]))
        if options.get("transformVars"):
            self.dynamic = True
        if self._last[0] is not test.assertions:
            self._last = (test.assertions, _used_names(test))
        for i, name in self._last[1]:
            place = self.uses.get(name)
            if place is None:
                self.uses[name] = [f"{test.source[1] or f'tests[{t}]'}.assert[{i}]", 1]
            else:
                place[1] += 1


def check_vars(suite, problems: list[str] | None = None) -> dict[str, str]:
    """Return a warning per unknown name that is no near miss (name -> warning). Every near miss is a
    problem: appended to `problems` when given (the preflight reports them with its own), else
    raised (all of them at once)."""
    if not suite.tests:
        return {}
    facts = getattr(suite.tests, "var_facts", None)  # a streamed suite's, gathered while it loaded
    if facts is None:
        facts = TestVars()
        for t, test in enumerate(suite.tests):
            facts.add(t, test)
    known: set[str] = set(ALWAYS) | facts.known
    dynamic = bool(suite.extensions) or facts.dynamic  # a beforeAll hook may add vars
    uses: dict[str, list] = {}  # name -> [where first, how many places]
    for i, prompt in enumerate(suite.prompts):
        if prompt.function:
            continue
        texts = [m.get("content") for m in prompt.messages or []] if prompt.messages is not None else [prompt.raw]
        for name in sorted(set().union(*(_names(t) for t in texts))):
            place = uses.setdefault(name, [f"prompts[{i}] ({_short(prompt.label)})", 0])
            place[1] += 1
    for name, (first, count) in facts.uses.items():
        uses.setdefault(name, [first, 0])[1] += count
    warnings = {}
    found = []
    for name, (first, count) in uses.items():
        native = name.startswith("<<")
        bare = name[2:-2] if native else name
        if bare in known:
            continue
        close = _close(bare, known - ALWAYS)
        where = first + (f" and {count - 1} more" if count > 1 else "")
        shown = f"<<{close}>>" if native and close else close
        if close is not None and not dynamic:
            found.append(f"{where} uses the var '{name}', which no test defines (did you mean '{shown}'?)")
            continue
        hint = f" (did you mean '{shown}'?)" if close else ""
        fate = "it stays as written" if native else "it renders empty"
        warnings[name] = f"{where} uses the var '{name}', which no test defines{hint}: {fate}"
    if found:
        file = ", ".join(getattr(suite, "config_files", []) or []) or None
        if problems is not None:
            problems.extend(f"{file}: {p}" if file else p for p in found)
        elif len(found) == 1:
            raise ConfigError(found[0] + "; nothing was sent", file)
        else:
            raise ConfigProblems([f"{file}: {p}" if file else p for p in found])
    return warnings


def _short(label: str) -> str:
    text = " ".join(str(label).split())
    return text if len(text) <= 40 else text[:39] + "…"
