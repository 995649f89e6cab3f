"""A suite's tests read again from their CSV or JSONL files each time they are iterated (issue 30): a
suite of 1,000,000 tests is never held, a test at a time is.

The loader streams a suite when all of its tests come from CSV or JSONL files (no test written in
the config, no YAML/JSON test file, no scenario, no extension hook) and parses every test once
while it loads, so bad input stops the load as before; that pass also gathers what the checks before any call read
from every test (`TestFacts`), so that they do not read the file again. The executor's pass parses
each test again, so a suite of at most HOLD_MAX tests, whose list costs little memory, is kept as the
list that pass parsed instead. A suite whose tests need each other or the whole suite
(`transformVars`, `storeOutputAs`, `runSerially`, select-best/max-score) is made a list at load
time, as are the tests of a --filter-failing, resumed or retried run (`StreamedTests.materialize`):
each of those features then runs exactly as before. (--filter-pattern, --filter-first-n and
--filter-sample hold only the tests they keep: config/plan.expand.)
"""

from __future__ import annotations

from typing import Callable, Iterator

from factcli.config.testsets import Entries, FileEntries
from factcli.config.var_check import TestVars
from factcli.sources import Rows
from factcli.types import TestCase, walk


def expands(name: str, value, keep: frozenset = frozenset()) -> bool:
    """Whether a var expands its test into a row per item (promptfoo's rule): string arrays and the files
    of a `file://` glob (sources.Rows), unless an assertion of the test takes it as a list by design
    (`keep`, scoring/registry.whole_vars)."""
    return (isinstance(value, list) and (isinstance(value, Rows) or (value and all(isinstance(x, str) for x in value)))
            and name not in keep)


def kept_whole(test: TestCase) -> frozenset:
    """The test's vars that stay one value whatever they hold: those its assertions take as lists."""
    if not any(isinstance(v, list) for v in test.vars.values()):
        return frozenset()
    from factcli.scoring.registry import whole_vars

    return whole_vars(test.assertions)


def combination_count(variables: dict, disable: bool = False, keep: frozenset = frozenset()) -> int:
    """How many rows a test's var combinations make (config/plan.var_combinations), without making them."""
    if disable:
        return 1
    n = 1
    for k, v in variables.items():  # (Rows is a list: most values, strings, are looked at once)
        if isinstance(v, list) and expands(k, v, keep):
            n *= len(v)
    return n


def expansion_of(test: TestCase) -> list[tuple[str, int]]:
    """The vars that expand this test into rows, with their lengths ([] when none does)."""
    if (test.options or {}).get("disableVarExpansion") or not any(isinstance(v, list) for v in test.vars.values()):
        return []
    keep = kept_whole(test)
    return [(k, len(v)) for k, v in test.vars.items() if expands(k, v, keep)]


# test options that make a test depend on others, or the run on every test: such a suite is a list
NEEDS_THE_SUITE = ("transformVars", "storeOutputAs", "runSerially")


class TestFacts:
    """What the checks before any call read from every test, gathered in the load's one pass."""

    def __init__(self):
        self.count = 0
        self.combinations = 0  # rows per column and repeat
        self.every_test_planned = True  # every test gives a row (an empty glob var gives none)
        self.model_graded = False  # some assertion has a judge: run/planning/graders.check_graders reads every test
        self.preflighted = False  # some assertion type has its own preflight check
        self.no_model_call = False  # a providerOutput, prefix or suffix (run/planning/preflight._empty_prompts)
        self.vars = TestVars()
        self.expansions = Expansions()  # the tests that list vars expand into rows, said once (config/plan)
        self._last: list | None = None  # the assertion list looked at last (defaultTest's is shared)

    def add(self, test: TestCase) -> bool:
        """Count `test` in; False when the suite needs to be a list."""
        options = test.options  # (most tests have none: what follows looks at them only if they do)
        if options and any(options.get(k) for k in NEEDS_THE_SUITE):
            return False
        if test.assertions is not self._last:  # (a CSV's __expected cells: a list per test, none kept)
            self._last = test.assertions
            if not self._look(test.assertions):
                return False
        disable = bool(options and options.get("disableVarExpansion"))
        n = combination_count(test.vars, disable)
        if n != 1:  # (most tests expand nothing: the assertions are looked at only for those that do)
            n = combination_count(test.vars, disable, kept_whole(test))
            if n != 1:
                self.expansions.add(test)
        self.combinations += n
        if n == 0:
            self.every_test_planned = False
        if test.provider_output is not None or (options and (options.get("prefix") or options.get("suffix"))):
            self.no_model_call = True
        self.vars.add(self.count, test)
        self.count += 1
        return True

    def _look(self, assertions: list) -> bool:
        from factcli.scoring.registry import COMPARING, lookup

        for a in walk(assertions):
            if a.type in COMPARING:
                return False  # the comparisons read every row of the run
            kind = lookup(a.type)
            if kind is not None:
                self.model_graded = self.model_graded or kind.model_graded
                self.preflighted = self.preflighted or kind.preflight is not None
        return True


class Expansions:
    """The tests that a list var expands into rows: the first one's place and vars, and how many."""

    def __init__(self):
        self.first: tuple[str, list[tuple[str, int]]] | None = None
        self.count = 0
        self.names: dict[str, None] = {}

    def add(self, test: TestCase) -> None:
        found = expansion_of(test)
        if not found:
            return
        if self.first is None:
            file, path = test.source
            self.first = (f"{file}: {path}" if file else (path or "a test"), found)
        self.count += 1
        self.names.update(dict.fromkeys(name for name, _ in found))


class StreamedTests:
    """The suite's tests, parsed again each time they are iterated; `len()` is known. Indexing, or
    `materialize()`, makes them a list once (the same tests from then on)."""

    def __init__(self, entries: Entries, parse: Callable[[tuple], TestCase], facts: TestFacts,
                 plain_row: Callable | None = None):
        self._entries, self._parse, self.facts, self._plain_row = entries, parse, facts, plain_row
        self._list: list | None = None

    @property
    def var_facts(self) -> TestVars:
        return self.facts.vars

    @property
    def streamed(self) -> bool:
        return self._list is None

    def __len__(self) -> int:
        return self.facts.count

    def __bool__(self) -> bool:
        return self.facts.count > 0

    def __iter__(self) -> Iterator[TestCase]:
        if self._list is not None:
            return iter(self._list)
        return _parsed(self._entries, self._parse, self._plain_row)

    def __getitem__(self, index):
        return self.materialize()[index]

    def materialize(self) -> list:
        if self._list is None:
            self._list = list(self)
        return self._list


def is_streamed(tests) -> bool:
    return isinstance(tests, StreamedTests) and tests.streamed


class HeldTests(list):
    """A suite of at most HOLD_MAX tests from CSV or JSONL files: the list its load parsed, with the
    facts that pass gathered, so that the checks before any call and the plan read those facts as
    they do a streamed suite's instead of going over every test again. Nothing adds to or changes
    the tests of a suite loaded this way (no transformVars, no hook); a copy or a slice of it is a
    plain list, without the facts."""

    streamed = False

    def __init__(self, tests: list, facts: TestFacts):
        super().__init__(tests)
        self.facts = facts

    @property
    def var_facts(self) -> TestVars:
        return self.facts.vars


def facts_of(tests) -> TestFacts | None:
    """The facts the load gathered from every test of the suite `tests` (streamed, made a list since,
    or held), or None for a suite loaded as a plain list."""
    return tests.facts if isinstance(tests, (StreamedTests, HeldTests)) else None


# A suite this small is held as the list its load parsed: parsing every test again as it runs costs
# more time than holding the list costs memory (benchmarks/README.md, issue 30).
HOLD_MAX = 20_000
# ... and whose vars' texts hold at most this many characters: 20,000 rows of 10 KB documents would
# hold 200 MB (issue 48)
HOLD_CHARS = 16 * 2**20


def load(entries: Entries, parse: Callable[[tuple], TestCase],
         plain_row: Callable | None = None) -> list | HeldTests | StreamedTests:
    """The tests of `entries`: streamed when every entry comes from a CSV or JSONL file and no test needs
    the suite, else a list. `plain_row(mapping, ctx, where)`: what `parse` gives for a CSV row without
    special columns, from the mapping its file made for that call alone (config/testcases.TestMaker)."""
    if not entries.parts or not all(isinstance(p, FileEntries) for p in entries.parts):
        return [parse(e) for e in entries]
    facts = TestFacts()
    held: list | None = []
    chars = 0
    for test in _parsed(entries, parse, plain_row):  # every test parsed once: bad input stops the load here
        if not facts.add(test):  # (defaultTest's options or assertions: found at the first test)
            return [parse(e) for e in entries]  # from the start again: the tests before were let go
        if held is not None:
            held.append(test)
            chars += sum(len(v) for v in test.vars.values() if isinstance(v, str))
            if len(held) > HOLD_MAX or chars > HOLD_CHARS:
                held = None
    return HeldTests(held, facts) if held is not None else StreamedTests(entries, parse, facts, plain_row)


def _parsed(entries: Entries, parse: Callable[[tuple], TestCase], plain_row: Callable | None) -> Iterator[TestCase]:
    """parse(entry) for each entry of `entries` (their parts all FileEntries), in order; a CSV file
    without special columns through `plain_row`, which takes its rows' mappings as they are."""
    for part in entries.parts:
        rows = part.plain_tests() if plain_row is not None else None
        if rows is None:
            for entry in part:
                yield parse(entry)
        else:
            ctx, label = part.ctx, part.label
            for n, t in rows:
                yield plain_row(t, ctx, label.format(n))
