"""Expand a Suite into evaluation steps: tests x var combinations x repeat x providers x prompts.

Numbering follows promptfoo: testIdx counts (test, repeat, var combination) in that order, and
promptIdx indexes the (provider, prompt) columns in provider-major order, skipping prompts a
provider's `prompts:` filter excludes.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass

from factcli.config.loader import Suite
from factcli.config.stream import TestFacts, combination_count, expands, facts_of, is_streamed, kept_whole
from factcli.types import EvalStep, Prompt, ProviderSpec


@dataclass
class Column:
    """A column of the run: one provider with one prompt, in the order results show them."""

    index: int
    provider: ProviderSpec
    provider_idx: int
    prompt: Prompt


def allowed(prompt: Prompt, spec: ProviderSpec) -> bool:
    if spec.prompts is None:
        return True
    for want in spec.prompts:
        if want in (prompt.label, prompt.id, prompt.raw):
            return True
        if want.endswith("*") and prompt.label.startswith(want[:-1]):
            return True
        if prompt.label.startswith(want + ":"):
            return True
    return False


def columns(suite: Suite) -> list[Column]:
    out = []
    for pi, spec in enumerate(suite.providers):
        for prompt in suite.prompts:
            if allowed(prompt, spec):
                out.append(Column(len(out), spec, pi, prompt))
    return out


def expansion_warning(tests) -> str | None:
    """One line, said before any call, when list vars expand tests into rows (promptfoo's rule): the first
    such test and var, and how many tests more; None when no test expands. A var an assertion takes as a
    list by design (citations' `passages`) never expands, so it is not among them."""
    from factcli.config.stream import Expansions, is_streamed

    if is_streamed(tests):
        found = tests.facts.expansions
    else:
        found = Expansions()
        for t in tests:
            found.add(t)
    if found.first is None:
        return None
    where, expanded = found.first
    name, n = expanded[0]
    rows = 1
    for _, size in expanded:
        rows *= size
    what = (f"its `{name}` var is a list of {n}, which var expansion makes {n} rows, one item each"
            if len(expanded) == 1 else
            f"its list vars {', '.join(f'`{k}` ({size})' for k, size in expanded)} make {rows} rows by var expansion")
    more = ""
    if found.count > 1:
        others = [k for k in found.names if k not in dict(expanded)]
        more = (f"; so do {found.count - 1} more test(s)"
                + (f" (vars {', '.join(f'`{k}`' for k in others)})" if others else ""))
    hint = " (docs/rag.md)" if "context" in found.names else ""
    return (f"{where}: {what}{more} (promptfoo's rule); set options.disableVarExpansion: true to keep a list "
            f"one value{hint}")


def var_combinations(variables: dict, disable: bool = False, keep: frozenset = frozenset()) -> list[dict]:
    """String arrays, and the files of a `file://` glob (sources.Rows), expand into their cartesian
    product; other arrays, and the vars in `keep` (an assertion takes them as lists:
    stream.kept_whole), stay one value (promptfoo)."""
    if disable:
        return [dict(variables)]
    keys, pools = [], []
    for k, v in variables.items():
        if expands(k, v, keep):
            keys.append(k)
            pools.append(v)
    if not keys:
        return [variables]  # the test's own dict: nothing writes to a step's vars
    combos = []
    for values in itertools.product(*pools):
        combo = dict(variables)
        combo.update(zip(keys, values))
        combos.append(combo)
    return combos


def test_combinations(test) -> list[dict]:
    """A test's var combinations: one a row."""
    return var_combinations(test.vars, bool((test.options or {}).get("disableVarExpansion")), kept_whole(test))


class Plan:
    """The run's steps in order, made as they are iterated: the executor's workers pull them one at a
    time, so a 100,000-test run never holds 100,000 steps (issue 30). Its length is counted when it
    is made. Each iteration makes new EvalStep objects: a row is known by its key (test_idx,
    prompt_idx, repeat_idx), never by the identity of its step. Indexing makes the list (tests, a
    one-row check)."""

    def __init__(self, tests, cols: list[Column], repeat: int, positions: list[int] | None = None,
                 facts: TestFacts | None = None):
        """`facts`: the load's facts of the suite when `tests` are all of its tests (config/stream.py)."""
        self.tests, self.cols, self.repeat = tests, cols, repeat
        # a filtered streamed suite's tests, parsed anew, are not the suite's objects: where each
        # one is in the suite, for the stored run's selection (run/recording/source.Source.options_record)
        self.positions = positions
        self.counts = None
        if is_streamed(tests):
            facts = tests.facts
        if facts is not None:  # counted while the suite loaded (config/stream.py)
            combinations, every = facts.combinations, facts.every_test_planned
        else:
            counts = self.counts = [combination_count(t.vars, bool(t.options.get("disableVarExpansion")),
                                                      kept_whole(t)) for t in tests]
            combinations, every = sum(counts), all(counts)
        self.total = combinations * repeat * len(cols)
        # every test gives at least one row (a var that is an empty glob gives none)
        self.every_test_planned = bool(cols) and repeat > 0 and every

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, index):
        return list(self)[index]

    def __iter__(self):
        cols, repeat = self.cols, self.repeat
        columns = [(col.index, col.prompt, col.provider, col.provider_idx) for col in cols]
        # one column, no repeat: a test without a list var is one step (the loops below give it the same)
        one = columns[0] if repeat == 1 and len(columns) == 1 else None
        test_idx = 0
        for test in self.tests:
            variables = test.vars
            for v in variables.values():  # (a test without a list var is its own one combination)
                if isinstance(v, list):
                    combos = test_combinations(test)
                    break
            else:
                if not test.options.get("disableVarExpansion"):
                    if one is not None:
                        yield EvalStep(test_idx, one[0], 0, test, variables, one[1], one[2], one[3])
                        test_idx += 1
                        continue
                    combos = (variables,)
                else:
                    combos = [dict(variables)]
            for r in range(repeat):
                for combo in combos:
                    for index, prompt, provider, provider_idx in columns:  # (EvalStep's fields, in order)
                        yield EvalStep(test_idx, index, r, test, combo, prompt, provider, provider_idx)
                    test_idx += 1


def first_tests_kept(first_n: int | None, pattern: str | None, failing) -> int | None:
    """How many tests from the suite's start `expand` can keep at most, when that is known before the
    suite loads: --filter-first-n N with no filter applied before it (--filter-pattern, --filter-failing
    pick among every test; --filter-sample picks among the N). The load then reads its tests files no
    further (config/lines.ReadLimit). None: any test may be kept (and for N = 0, none is)."""
    return first_n if first_n is not None and first_n > 0 and not pattern and not failing else None


def tests_counted(suite: Suite) -> str:
    """How many tests the suite has, said as far as its load read them."""
    if suite.tests_read_first is None:
        return str(len(suite.tests))
    return (f"{len(suite.tests)} read: the tests files were read no further than "
            f"--filter-first-n {suite.tests_read_first} keeps")


def expand(suite: Suite, repeat: int = 1, *, pattern: str | None = None, first_n: int | None = None,
           sample: int | None = None) -> tuple[list[Column], Plan]:
    cols = columns(suite)
    if is_streamed(suite.tests) and (first_n is None or first_n >= 0):
        if pattern is None and first_n is None and sample is None:
            return cols, Plan(suite.tests, cols, repeat)  # read again as the steps are made
        # only the tests the filters keep are held, with their places in the suite
        kept = enumerate(suite.tests)
        if pattern:
            rx = re.compile(pattern)
            kept = ((i, t) for i, t in kept if rx.search(t.description or ""))
        if first_n is not None:
            kept = itertools.islice(kept, first_n)
        if sample is not None:  # the places the other filters keep, then the sample among them, as below
            places = [i for i, _ in kept] if pattern else range(len(suite.tests))[:first_n]
            if sample < len(places):
                places = [places[k] for k in sorted(random.sample(range(len(places)), sample))]
            wanted = set(places)
            kept = ((i, t) for i, t in enumerate(suite.tests) if i in wanted)
        pairs = list(kept)
        return cols, Plan([t for _, t in pairs], cols, repeat, positions=[i for i, _ in pairs])
    # (a negative --filter-first-n counts from the end: a streamed suite is made a list, the same objects after)
    tests = list(suite.tests.materialize() if is_streamed(suite.tests) else suite.tests)
    if pattern is None and first_n is None and sample is None:  # every test: the load's facts count them
        return cols, Plan(tests, cols, repeat, facts=facts_of(suite.tests))
    if pattern:
        rx = re.compile(pattern)
        tests = [t for t in tests if rx.search(t.description or "")]
    if first_n is not None:
        tests = tests[:first_n]
    if sample is not None and sample < len(tests):
        picked = sorted(random.sample(range(len(tests)), sample))
        tests = [tests[i] for i in picked]
    return cols, Plan(tests, cols, repeat)
