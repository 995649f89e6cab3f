"""The load side's fast paths (a CSV row of vars alone, a row whose
vars are all data, the plan's steps, a held suite's facts) give exactly what the general paths give."""

import asyncio
import itertools
import json

import pytest
from hypothesis import example, given, settings, strategies as st

from factcli.config import stream, testcases, testsets
from factcli.config.context import Ctx
from factcli.config.loader import load_suite
from factcli.config.plan import Column, Plan, var_combinations
from factcli.config.prompts import make_prompt
from factcli.run.planning import graders, preflight, row_vars
from factcli.run import runner
from factcli.sources import Rows
from factcli.types import EvalStep, ProviderSpec, TestCase

CTX = Ctx("tests.csv", ".", {})


def _same_test(fast: TestCase, slow: TestCase) -> None:
    assert fast == slow and repr(fast) == repr(slow)  # (repr: 1 and 1.0 are equal, not the same)
    assert list(fast.raw) == list(slow.raw) and list(fast.vars) == list(slow.vars)
    assert json.dumps(fast.raw) == json.dumps(slow.raw)


def _step(vars_, prompt_raw="Answer: {{q}}", options=None, request_params=None, prompt_config=None, repeat=0):
    prompt = make_prompt(prompt_raw, None)
    prompt.config = prompt_config or {}
    test = TestCase(vars=vars_, options=options or {}, request_params=request_params or {})
    return EvalStep(4, 1, repeat, test, vars_, prompt, ProviderSpec(id="echo"), 0)


ROW_STEPS = [
    _step({"q": "question 1"}),
    _step({"q": "a\n", "n": 3, "f": 1.5, "none": None, "l": ["x", "y\n"], "d": {"k": "v\n"}, "b": True}),
    _step({"q": "x\n\n"}, prompt_raw="{{q}} {{missing}} <<n>>"),
    _step({"q": "x"}, prompt_raw='[{"role": "user", "content": "{{q}}"}]'),
    _step({"q": "x"}, prompt_raw='  [{"role": "system", "content": "be brief"}, {"role": "user", "content": "{{q}}"}]'),
    _step({"q": "x"}, prompt_raw="[not json {{q}}"),
    _step({"q": "x"}, prompt_raw="{% if q %}yes {{ q | upper }}{% endif %}"),
    _step({"q": "x"}, options={"prefix": "P: ", "suffix": "\nS"}, request_params={"temperature": 0},
          prompt_config={"max_tokens": 5}),
    _step({"q": "x", "__evalId": "mine"}, prompt_raw="{{__evalId}} {{__evalStepId}} {{__repeatIndex}}", repeat=2),
    _step({"q": "file://notes.txt"}),
    _step({"q": "{{ env }}"}),
    _step({}, prompt_raw="no vars at all"),
]


@pytest.mark.parametrize("eval_id", ["", "eval-1", "eval-2\n", "file://x"])
@pytest.mark.parametrize("step", ROW_STEPS, ids=range(len(ROW_STEPS)))
def test_a_row_of_data_vars_is_built_as_the_general_path_builds_it(monkeypatch, step, eval_id):
    fast = asyncio.run(row_vars.build_row(step, eval_id=eval_id))
    with monkeypatch.context() as m:
        m.setattr(row_vars, "_data_row", lambda *a: None)
        slow = asyncio.run(row_vars.build_row(step, eval_id=eval_id))
    assert fast == slow and repr(fast) == repr(slow)  # (repr: 1 and 1.0 are equal, not the same)
    assert list(fast.vars) == list(slow.vars) and list(fast.prompt.vars) == list(slow.prompt.vars)
    assert fast.vars is not step.vars and fast.vars is not fast.prompt.vars  # nothing shared to write to


@pytest.mark.parametrize("extra_vars", [None, {}, {"_conversation": []}])
@pytest.mark.parametrize("step", ROW_STEPS, ids=range(len(ROW_STEPS)))
def test_a_row_made_without_a_coroutine_is_the_row_build_row_makes(monkeypatch, step, extra_vars):
    """The executor takes row_vars.data_row's row when it gives one, else awaits build_row."""
    fast = row_vars.data_row(step, "eval-1", extra_vars)
    with monkeypatch.context() as m:
        m.setattr(row_vars, "_data_row", lambda *a: None)
        slow = asyncio.run(row_vars.build_row(step, eval_id="eval-1", extra_vars=extra_vars))
    if fast is not None:
        assert fast == slow and repr(fast) == repr(slow)
        assert list(fast.vars) == list(slow.vars) and list(fast.prompt.vars) == list(slow.prompt.vars)
    assert (fast is None) == (bool(extra_vars) or row_vars._data_row(step, "eval-1") is None)


def test_the_data_row_path_is_taken_for_plain_rows_only():
    assert row_vars._data_row(ROW_STEPS[0], "eval-1") is not None
    assert row_vars._data_row(ROW_STEPS[8], "eval-1") is None  # a runtime var's name among the vars
    assert row_vars._data_row(ROW_STEPS[9], "eval-1") is None  # maybe a script var


def _general_steps(tests, cols, repeat):
    """The plan's steps as the plan made them before its fast loop: every test through var_combinations."""
    test_idx = 0
    for test in tests:
        combos = var_combinations(test.vars, bool(test.options.get("disableVarExpansion")))
        for r in range(repeat):
            for combo in combos:
                for col in cols:
                    yield EvalStep(test_idx=test_idx, prompt_idx=col.index, repeat_idx=r, test=test, vars=combo,
                                   prompt=col.prompt, provider=col.provider, provider_idx=col.provider_idx)
                test_idx += 1


def test_the_plans_steps_are_the_general_expansions_steps():
    tests = [TestCase(vars={"q": "a"}), TestCase(vars={"q": ["a", "b"], "r": ["1", "2"]}),
             TestCase(vars={"q": ["a", "b"]}, options={"disableVarExpansion": True}),
             TestCase(vars={"q": "a"}, options={"disableVarExpansion": True}), TestCase(vars={"g": Rows()}),
             TestCase(vars={"g": Rows(["x", "y"]), "n": [1, 2]}), TestCase(vars={})]
    prompts = [make_prompt("{{q}}", None), make_prompt("again {{q}}", None)]
    providers = [ProviderSpec(id="echo"), ProviderSpec(id="echo", label="two")]
    for n_cols, repeat in itertools.product((1, 2, 4), (0, 1, 3)):
        cols = [Column(i, providers[i // 2], i // 2, prompts[i % 2]) for i in range(n_cols)]
        fast = list(Plan(tests, cols, repeat))
        slow = list(_general_steps(tests, cols, repeat))
        assert fast == slow and len(fast) == len(Plan(tests, cols, repeat))
        # the test's own mapping where the general path gives it (nothing writes to a step's vars)
        assert [s.vars is s.test.vars for s in fast] == [s.vars is s.test.vars for s in slow]


ASSERTIONS = [{"type": "contains", "value": "{{q}}"}, {"type": "regex", "value": "{{ qq }}"},
              {"type": "llm-rubric"}]


def _csv_suite(tmp_path, header: str, rows: list[str], default_test: dict, prompts=("Answer: {{q}}",)):
    (tmp_path / "rows.csv").write_text(header + "\n" + "".join(r + "\n" for r in rows))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"prompts": list(prompts), "providers": ["echo"], "defaultTest": default_test,
                               "tests": f"file://{tmp_path / 'rows.csv'}"}))
    return load_suite([cfg])


@pytest.mark.parametrize("default_test,header,rows", [
    ({"assert": ASSERTIONS, "options": {"provider": "echo"}}, "q,__expected", ["one,contains:o", "two,"]),
    ({"assert": ASSERTIONS[:2]}, "q", ["one", "two"]),
    ({"assert": [ASSERTIONS[2]], "options": {"provider": "echo", "rubricPrompt": "{{output}}"}}, "q", ["one"]),
    ({"options": {"prefix": "P "}}, "q,__providerOutput", ["one,out"]),
    ({}, "q", []),
])
def test_a_held_suites_facts_give_what_going_over_its_tests_gives(tmp_path, default_test, header, rows):
    held = _csv_suite(tmp_path, header, rows, default_test)
    assert isinstance(held.tests, stream.HeldTests) == bool(rows)
    plain = _csv_suite(tmp_path, header, rows, default_test)
    plain.tests = list(plain.tests)  # a plain list: every check goes over every test
    runs = [runner.prepare(s, runner.RunOptions()) for s in (held, plain)]
    assert runs[0].graders == runs[1].graders and runs[0].grader_specs == runs[1].grader_specs
    assert runs[0].warnings == runs[1].warnings and runs[0]._unknown_vars == runs[1]._unknown_vars
    assert len(runs[0].steps) == len(runs[1].steps) == len(list(runs[0].steps))
    assert runs[0].steps.tests_selected(held.tests) == runs[1].steps.tests_selected(plain.tests)
    assert runs[0].conversations.active == runs[1].conversations.active
    problems = []
    for run in runs:
        try:
            preflight.check(run, [], {})
            problems.append(None)
        except preflight.PreflightFailed as exc:
            problems.append((str(exc), exc.problems))
    assert problems[0] == problems[1]
    assert preflight._assertion_problems(held) == preflight._assertion_problems(plain)
    assert preflight._empty_prompts(held) == preflight._empty_prompts(plain)


def test_shared_assertion_lists_are_checked_once_and_still_name_every_test(tmp_path):
    """check_graders and the preflight skip a test whose assertion list was found without a judge or
    a check; a list with one still counts every test that has it."""
    tests = [{"vars": {"q": str(i)}} for i in range(3)]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"prompts": ["{{q}}"], "providers": ["echo"], "tests": tests,
                               "defaultTest": {"assert": [{"type": "llm-rubric"}], "options": {"provider": "echo"}}}))
    suite = load_suite([cfg])
    assert preflight._assertion_problems(suite) == [
        "tests[0] and 2 more: llm-rubric has no value: the grader would score against an empty rubric (write the "
        "rubric as its value:, or give a rubricPrompt that needs none)"]
    assert graders.check_graders(suite, runner.prepare(suite, runner.RunOptions()).grader_source, []) == ["echo"]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.lists(st.sampled_from([" ", "\n", "\t", "\x0b", "\u2028", "\x1c", "[", "]", "{", "}", '"',
                                           "role", ":", ",", "a", "\u00a0"]), max_size=30).map("".join),
                 st.sampled_from(['[{"role": "user", "content": "x"}]', ' \n[{"role": "user"}]',
                                  "\u2028[{\"role\": 1}]", "\x1c[{\"role\": 1}]", "[]", "x[", ""])))
def test_chat_messages_finds_what_stripping_the_text_finds(raw):
    from factcli.config.prompts import chat_messages

    # a leading space passes the quick look, so the text is stripped and parsed as before the look
    assert chat_messages(raw) == chat_messages(" " + raw)


@pytest.mark.parametrize("assertions", [
    [], [{"type": "contains", "value": "x"}, {"type": "regex", "value": "y\\d"}],
    [{"type": "contains", "value": "{{ q }}"}],
    [{"type": "contains", "value": "x"}, {"type": "equals", "value": "<<r>>"}],
    [{"type": "assert-set", "assert": [{"type": "contains", "value": "{{ s }}"}, {"type": "contains", "value": "x"}]}],
    [{"type": "contains-any", "value": ["{{ a }}", "b"]}], [{"type": "is-json", "value": {"k": "{{ o }}"}}],
    [{"type": "contains", "value": "file://{{ f }}.txt"}], [{"type": "javascript", "value": "output == '{{ j }}'"}],
])
def test_the_names_assertion_values_use_are_found_as_the_general_walk_finds_them(assertions, tmp_path):
    from factcli.config import var_check

    (tmp_path / "{{ f }}.txt").write_text("x")
    ctx = Ctx(str(tmp_path / "c.yaml"), tmp_path, {})
    test = testcases.parse_test({"vars": {"q": "1"}, "assert": assertions}, ctx, "tests[0]")
    walked = [(i, name) for i, a in var_check._assertions(test) for name in sorted(var_check._names(a.value))]
    assert var_check._used_names(test) == walked


DEFAULT_TESTS = [
    {}, {"assert": [{"type": "contains", "value": "x"}, {"type": "regex", "value": "y\\d"}]},
    {"assert": [{"type": "contains", "value": "{{ q }}"}], "vars": {"d": "1"}},
    {"assert": [{"type": "contains", "value": "x"}], "options": {"provider": "echo"}},
    {"options": {"temperature": 0}}, {"metadata": {"k": "v"}}, {"threshold": 0.5}, {"providerOutput": "out"},
    {"vars": {"t": "{{ q }}!"}}, {"assertScoringFunction": "file://score.py"},
]


def _same_made(fast: TestCase, slow: TestCase, default: TestCase) -> None:
    _same_test(fast, slow)
    for name in ("options", "metadata", "request_params", "template_vars"):
        assert type(getattr(fast, name)) is type(getattr(slow, name))
    assert (fast.assertions is default.assertions) == (slow.assertions is default.assertions)


def _csv_tests(folder, header: list, rows: list, default_test: dict, general: bool, hold_max: int | None = None):
    """The tests load_suite makes of a CSV file, by the plain-row path or (`general`) each row's mapping
    parsed and merged; `hold_max`: streamed above it."""
    import csv

    with open(folder / "rows.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    (folder / "c.yaml").write_text(json.dumps({"prompts": ["{{q}}"], "providers": ["echo"],
                                               "defaultTest": default_test, "tests": "file://rows.csv"}))
    with pytest.MonkeyPatch.context() as m:
        if general:
            m.setattr(testsets.CsvRows, "plain_tests", lambda self: None)
        if hold_max is not None:
            m.setattr(stream, "HOLD_MAX", hold_max)
        suite = load_suite([folder / "c.yaml"])
        return suite, list(suite.tests)


def test_tests_made_merged_share_what_merged_tests_share():
    """Consecutive tests with only defaultTest's assertions share its list and one list of their raws,
    as merging each parsed test makes them (the stored rows keep one text for a shared list)."""
    default = testcases.parse_test({"assert": [{"type": "contains", "value": "x"}]}, CTX, "defaultTest",
                                   is_default=True)
    make = testcases.test_maker(default)
    for made in ([make({"vars": {"q": str(i)}}, CTX, f"row {i}", False) for i in range(3)],
                 [merge.test(testcases.parse_test({"vars": {"q": str(i)}}, CTX, f"row {i}"))
                  for merge in [testcases.Merge(default)] for i in range(3)]):
        assert all(m.assertions is default.assertions for m in made)
        assert made[0].raw["assert"] is made[1].raw["assert"] is made[2].raw["assert"]


PLAIN_HEADERS = [["q"], [" q ", "a b"], ["q", ""], ["x", "y", "z"]]
CELLS = ["question 1", "", "a\n", "file://notes.txt", "file://missing.txt", "{{ q }}", " z "]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(PLAIN_HEADERS),
       st.lists(st.lists(st.sampled_from(CELLS), min_size=1, max_size=3), min_size=1, max_size=4),
       st.sampled_from(DEFAULT_TESTS[:4]), st.sampled_from([None, 0]))
def test_a_csv_files_plain_rows_are_made_as_their_mappings_are_parsed_and_merged(header, rows, default_test,
                                                                                 hold_max):
    import tempfile
    from pathlib import Path

    rows = [row[:len(header)] for row in rows]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "notes.txt").write_text("notes")
        made = []
        for general in (False, True):
            try:
                made.append(_csv_tests(folder, header, rows, default_test, general, hold_max))
            except Exception as exc:  # noqa: BLE001 - the same error either way
                made.append(f"{type(exc).__name__}: {exc}")
    if isinstance(made[1], str):
        assert made[0] == made[1]
        return
    (fast_suite, fast), (slow_suite, slow) = made
    assert type(fast_suite.tests) is type(slow_suite.tests) and len(fast) == len(slow)
    default = testcases.parse_test(dict(default_test), CTX, "defaultTest", is_default=True)
    for f, s in zip(fast, slow):
        _same_made(f, s, default)
        assert (f.assertions is fast[0].assertions) == (s.assertions is slow[0].assertions)
        assert (f.raw.get("assert") is fast[0].raw.get("assert")) == (s.raw.get("assert") is slow[0].raw.get("assert"))


def test_the_plain_row_path_is_taken_for_csv_files_without_special_columns_only(tmp_path, monkeypatch):
    taken = []
    plain_row = testcases.TestMaker.plain_row
    monkeypatch.setattr(testcases.TestMaker, "plain_row", lambda *a: taken.append(1) or plain_row(*a))
    only_assertions = {"assert": [{"type": "contains", "value": "x"}]}
    _csv_tests(tmp_path, ["q"], [["a"], ["b"]], only_assertions, general=False)
    assert len(taken) == 2
    for header, default_test in ((["q", "__expected"], only_assertions), (["q", "_x"], only_assertions),
                                 (["q", " q"], only_assertions), (["q"], {"vars": {"d": "1"}}),
                                 (["q"], {"options": {"provider": "echo"}})):
        _csv_tests(tmp_path, header, [["a", "contains:a"][:len(header)]], default_test, general=False)
    assert len(taken) == 2


HEADER_NAMES = ["q", " q ", "q ", "a b", "", "_q", " _q", "__expected", "x_", "q2", "__metric", "_expected"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(HEADER_NAMES), min_size=1, max_size=4),
       st.lists(st.lists(st.sampled_from(["x", "", "y\n", " z ", "file://a.txt", "a,b", "contains:x"]), min_size=1,
                         max_size=4), min_size=1, max_size=4))
@example(["q", "q ", "q"], [["x"], ["y", "z"]])  # a name twice: a short row's missing cell is its last one
def test_a_csv_files_tests_are_its_rows_as_csv_dictreader_reads_them(header, rows):
    """Whichever way a header's rows are made (vars alone or not), each is the test of the row
    csv.DictReader reads (duplicate names, short rows), with the header's warnings said once."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    writer.writerows(row[:len(header)] for row in rows)
    text = buffer.getvalue()
    made_warnings: list = []
    made = list(testsets.CsvRows(text, "t.csv", made_warnings))
    read_warnings: list = []
    read = [(n, testsets.test_from_csv_row(row, "t.csv", n, read_warnings))
            for n, row in enumerate(csv.DictReader(io.StringIO(text, newline="")), 1)]
    # the file's own warnings (rows of empty cells, near-miss __expected prefixes) come from its whole text
    headers = [w for w in made_warnings if "every cell is empty" not in w and "is no assertion type" not in w]
    assert json.dumps(made) == json.dumps(read) and headers == read_warnings
