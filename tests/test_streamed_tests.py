"""A large suite's tests and steps are made a few at a time (issue 30): a CSV file's rows are turned
into tests as the loader parses them, and the plan's steps as the executor's workers pull them.
Structural checks only (how far ahead anything is made), never memory or time."""

import asyncio
import json

import pytest

from factcli import sources
from factcli.config import csv_text, lines, stream, testsets
from factcli.errors import ConfigError
from factcli.config.loader import load_suite
from factcli.config.plan import Plan, expand
from factcli.config.stream import StreamedTests
from factcli.run import runner
from factcli.run.planning.steps import Steps

ASSERTIONS = [{"type": "contains", "value": "Answer"}, {"type": "regex", "value": r"question \d+"}]


@pytest.fixture(autouse=True)
def stream_every_suite(monkeypatch):
    """These suites are small: streamed here as a suite of more than HOLD_MAX tests is."""
    monkeypatch.setattr(stream, "HOLD_MAX", 0)


def _config(tmp_path, n: int, extra: str = "") -> str:
    rows = tmp_path / "rows.csv"
    rows.write_text("q,__expected\n" + "".join(f"question {i},contains:{i}\n" for i in range(n)) + extra)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"prompts": ["Answer: {{q}}"], "providers": ["echo"],
                               "defaultTest": {"assert": ASSERTIONS}, "tests": f"file://{rows}"}))
    return str(cfg)


def _count_tests_made(loader, monkeypatch, parsed: list) -> None:
    """One item in `parsed` for each test the loader makes (parses and merges with defaultTest)."""
    from factcli.config.testcases import TestMaker

    for name in ("__call__", "plain_row"):
        def counted(*args, _make=getattr(TestMaker, name), **kwargs):
            parsed.append(1)
            return _make(*args, **kwargs)

        monkeypatch.setattr(TestMaker, name, counted)


def test_the_loader_parses_a_csv_row_as_soon_as_it_is_made(tmp_path, monkeypatch):
    from factcli.config import loader

    made, parsed, ahead = [], [], []
    row_to_test = testsets.test_from_csv_row

    def counted_row(row, file, n, warnings):
        made.append(n)
        ahead.append(len(made) - len(parsed))
        return row_to_test(row, file, n, warnings)

    monkeypatch.setattr(testsets, "test_from_csv_row", counted_row)
    _count_tests_made(loader, monkeypatch, parsed)
    suite = load_suite([_config(tmp_path, 50)])
    # the first row is made when the file is read (its column warnings), then one row per parse
    assert max(ahead) <= 2 and len(made) == 51 and len(suite.tests) == 50
    assert isinstance(suite.tests, StreamedTests) and suite.tests.streamed
    assert [t.vars for t in suite.tests][49] == {"q": "question 49"}  # read again
    assert len(made) == 101 and max(ahead) <= 2
    assert suite.tests[49].vars == {"q": "question 49"} and not suite.tests.streamed  # indexed: a list


def test_csv_rows_are_checked_whole_when_read(tmp_path):
    cfg = _config(tmp_path, 5, extra="question x,contains:x,too many\n")
    import pytest

    from factcli.errors import ConfigError

    with pytest.raises(ConfigError, match="row has 3 cells but the header has 2"):
        load_suite([cfg])


def test_the_plan_is_made_as_it_is_iterated_and_counts_its_rows(tmp_path):
    suite = load_suite([_config(tmp_path, 7)])
    cols, plan = expand(suite, repeat=2)
    assert isinstance(plan, Plan) and len(plan) == 14
    it = iter(plan)
    first = next(it)
    assert (first.test_idx, first.repeat_idx, first.vars) == (0, 0, {"q": "question 0"})
    steps = [first, *it]
    assert [(s.test_idx, s.repeat_idx) for s in steps] == [(i * 2 + r, r) for i in range(7) for r in range(2)]
    assert [s.vars for s in plan] == [s.vars for s in steps]  # the same steps again, made anew


def test_the_executor_pulls_steps_a_few_at_a_time(tmp_path, monkeypatch):
    suite = load_suite([_config(tmp_path, 60)])
    run = runner.prepare(suite, runner.RunOptions(max_concurrency=3))
    plan, pulled, finished, ahead = run.steps, [], [], []

    def steps():
        for step in plan:
            pulled.append(step)
            ahead.append(len(pulled) - len(finished))
            yield step

    class Counted(Plan):
        def __init__(self):
            self.total = len(plan)

        def __iter__(self):
            return steps()

    run.steps = Steps(Counted())
    asyncio.run(runner.execute(run, on_result=lambda r: finished.append(r)))
    assert len(finished) == 60 and run.successes == 60
    assert max(ahead) <= 3 + 1  # one step per worker, and the one being taken


def test_a_csv_suite_runs_to_the_same_rows_as_its_tests_written_in_the_config(tmp_path):
    import factcli

    cfg = _config(tmp_path, 12)
    streamed = factcli.evaluate(cfg, store=False)
    written = factcli.evaluate({"prompts": ["Answer: {{q}}"], "providers": ["echo"],
                                "defaultTest": {"assert": ASSERTIONS},
                                "tests": [{"description": f"Row #{i + 1}", "vars": {"q": f"question {i}"},
                                           "assert": [{"type": "contains", "value": str(i)}]}
                                          for i in range(12)]}, store=False)
    def rows(run):
        return [(r.step.test_idx, r.step.vars, r.success, r.response.output, r.step.test.description)
                for r in run.rows]

    assert rows(streamed) == rows(written) and len(rows(streamed)) == 12


def test_a_jsonl_suite_is_streamed_and_runs_as_the_same_tests_written_in_the_config(tmp_path):
    import factcli

    lines = [{"vars": {"q": f"question {i}"}, "assert": [{"type": "contains", "value": str(i)}]} for i in range(9)]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(t) for t in lines[:4]) + "\n\n"
                                      + "\r\n".join(json.dumps(t) for t in lines[4:]) + "\n")
    config = {"prompts": ["Answer: {{q}}"], "providers": ["echo"], "defaultTest": {"assert": ASSERTIONS}}
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({**config, "tests": f"file://{tmp_path / 't.jsonl'}"}))
    suite = load_suite([cfg])
    assert isinstance(suite.tests, StreamedTests) and len(suite.tests) == 9
    assert [t.source[1] for t in suite.tests] == [f"[{j}]" for j in range(9)]
    streamed = factcli.evaluate(str(cfg), store=False)
    written = factcli.evaluate({**config, "tests": lines}, store=False)

    def rows(run):
        return [(r.step.test_idx, r.step.vars, r.success, r.response.output) for r in run.rows]

    assert rows(streamed) == rows(written) and len(rows(streamed)) == 9


def test_a_jsonl_line_naming_a_test_file_makes_the_suite_a_list(tmp_path):
    (tmp_path / "more.csv").write_text("q\nquestion 1\n")
    (tmp_path / "t.jsonl").write_text(json.dumps({"vars": {"q": "question 0"}}) + "\n" + json.dumps("file://more.csv"))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"prompts": ["{{q}}"], "providers": ["echo"], "tests": f"file://{tmp_path / 't.jsonl'}"}))
    suite = load_suite([cfg])
    assert isinstance(suite.tests, list) and [t.vars["q"] for t in suite.tests] == ["question 0", "question 1"]


def test_a_suite_with_a_feature_that_needs_it_whole_is_a_list_and_runs_as_before(tmp_path):
    import factcli

    rows = tmp_path / "rows.csv"
    rows.write_text("q\none\ntwo\nthree\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"prompts": ["{{q}} {{last}}"], "providers": ["echo"],
                               "defaultTest": {"options": {"storeOutputAs": "last"}}, "tests": f"file://{rows}"}))
    suite = load_suite([cfg])
    assert isinstance(suite.tests, list) and len(suite.tests) == 3
    run = factcli.evaluate(str(cfg), store=False)
    assert [r.response.output for r in run.rows] == ["one ", "two one ", "three two one "]


def test_csv_lines_are_split_as_a_stringio_splits_them():
    import io

    from hypothesis import given, strategies as st

    @given(st.text(alphabet=st.sampled_from(["a", ",", '"', "\r", "\n", "\x0b", "\x85", "\u2028", "é"]), max_size=40))
    def same(text):
        assert [m.group() for m in lines.CSV_LINE.finditer(text)] == list(io.StringIO(text, newline=""))

    same()


def test_csv_lines_are_split_a_chunk_at_a_time_as_a_stringio_splits_them(monkeypatch):
    import io

    from hypothesis import given, settings, strategies as st

    @settings(max_examples=300)
    @given(st.text(alphabet=st.sampled_from(["a", ",", '"', "\r", "\n", "\x0b", "\x0c", "\x1c", "\x85", "\u2028",
                                             "\u2029", "é"]), max_size=40), st.integers(0, 12))
    def same(text, chunk):
        monkeypatch.setattr(lines, "CSV_CHUNK", chunk)
        assert list(csv_text.csv_lines(text)) == list(io.StringIO(text, newline=""))

    same()


def test_filters_on_a_streamed_suite_hold_only_the_tests_they_keep_and_store_which(tmp_path, monkeypatch):
    from factcli.run.recording.source import Source
    from factcli.run.flow import EvalOptions, Flow

    cfg = _config(tmp_path, 30)
    suite = load_suite([cfg])
    cols, plan = expand(suite, pattern=r"#(1\d|2)$", first_n=4)
    assert [t.description for t in plan.tests] == ["Row #2", "Row #10", "Row #11", "Row #12"]
    assert plan.positions == [1, 9, 10, 11] and len(plan) == 4 and suite.tests.streamed  # not made a list
    records = []
    monkeypatch.setattr(Source, "options_record",
                        lambda self, run, f=Source.options_record: records.append(f(self, run)) or records[-1])
    flow = Flow(EvalOptions(config=[cfg], run=runner.RunOptions(filter_pattern=r"#(1\d|2)$", filter_first_n=4)))
    flow.prepare()
    asyncio.run(flow.execute())
    assert records[0]["tests"] == [1, 9, 10, 11] and flow.run.row_count == 4


def test_a_suite_of_at_most_hold_max_tests_is_held_as_the_list_its_load_parsed(tmp_path, monkeypatch):
    """Parsing each test again as it runs costs more than holding a small suite: parsed once."""
    from factcli.config import loader

    parsed = []
    _count_tests_made(loader, monkeypatch, parsed)
    monkeypatch.setattr(stream, "HOLD_MAX", 50)
    held = load_suite([_config(tmp_path, 50)])
    loaded = len(parsed)  # each row once (and defaultTest)
    assert isinstance(held.tests, list) and len(held.tests) == 50 and loaded in (50, 51)
    run = runner.prepare(held, runner.RunOptions())
    asyncio.run(runner.execute(run))
    assert len(parsed) == loaded and run.row_count == 50
    monkeypatch.setattr(stream, "HOLD_MAX", 49)
    streamed = load_suite([_config(tmp_path, 50)])
    assert isinstance(streamed.tests, StreamedTests) and streamed.tests.streamed


def test_filter_sample_on_a_streamed_suite_holds_only_its_sample_and_picks_as_a_list_does(tmp_path, monkeypatch):
    import random

    from factcli.run.recording.source import Source
    from factcli.run.flow import EvalOptions, Flow

    cfg = _config(tmp_path, 40)
    suite = load_suite([cfg])
    held = load_suite([cfg])
    held.tests = list(held.tests)  # the same tests as a list: how --filter-sample picked before
    for pattern, first_n in ((None, None), (r"#[123]\d$", None), (None, 25), (r"#[123]\d$", 12)):
        random.seed(7)
        _, plan = expand(suite, pattern=pattern, first_n=first_n, sample=5)
        random.seed(7)
        _, listed = expand(held, pattern=pattern, first_n=first_n, sample=5)
        assert [t.description for t in plan.tests] == [t.description for t in listed.tests]
        assert len(plan.tests) == 5 and suite.tests.streamed  # only the sample is held
        assert plan.positions == [int(t.description.split("#")[1]) - 1 for t in plan.tests]
    records = []
    monkeypatch.setattr(Source, "options_record",
                        lambda self, run, f=Source.options_record: records.append(f(self, run)) or records[-1])
    random.seed(3)
    flow = Flow(EvalOptions(config=[cfg], run=runner.RunOptions(filter_sample=6)))
    flow.prepare()
    asyncio.run(flow.execute())
    assert flow.run.row_count == 6 and len(records[0]["tests"]) == 6
    assert records[0]["tests"] == sorted(records[0]["tests"])


def test_a_tests_file_is_read_a_piece_at_a_time_into_the_lines_a_stringio_gives(monkeypatch, tmp_path):
    """sources.read_chunks: the file's pieces, each cut after a newline, make the same lines (CRLF, a
    lone CR, a BOM, a character of several bytes split across two reads) as the whole text."""
    import io

    from hypothesis import given, settings, strategies as st

    path = tmp_path / "t.csv"

    @settings(max_examples=200)
    @given(st.text(alphabet=st.sampled_from(["a", ",", '"', "\r", "\n", "\x85", "\u2028", "é", "😀"]), max_size=40),
           st.integers(1, 7), st.booleans())
    def same(text, chunk, bom):
        monkeypatch.setattr(sources, "READ_CHUNK", chunk)
        path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
        pieces = list(sources.read_chunks(path, str(path), ""))
        assert all(p.endswith("\n") for p in pieces[:-1])
        assert list(lines.csv_lines(pieces)) == list(io.StringIO(text, newline=""))

    same()


def test_a_filter_keeps_a_few_rows_of_a_file_read_as_a_stream(tmp_path, monkeypatch):
    """The CSV's text is never held: CsvRows keeps its path and reads it a piece at a time."""
    cfg = _config(tmp_path, 50)
    reads = []
    real = sources.read_chunks
    monkeypatch.setattr(sources, "read_chunks", lambda *a: reads.append(a[0]) or real(*a))
    suite = load_suite([cfg])
    assert len(suite.tests) == 50 and reads and all(str(p).endswith("rows.csv") for p in reads)
    assert [t.vars["q"] for t in list(suite.tests)[:2]] == ["question 0", "question 1"]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".yaml"])
def test_a_tests_file_that_never_ends_is_refused_in_one_line(tmp_path, suffix):
    """A tests file symlinked to /dev/zero: refused before a byte is read, not read until memory runs out."""
    (tmp_path / f"rows{suffix}").symlink_to("/dev/zero")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"prompts": ["{{q}}"], "providers": ["echo"], "tests": f"file://rows{suffix}"}))
    with pytest.raises(ConfigError) as info:
        load_suite([str(cfg)])
    assert "is a device, not a file (it never ends)" in str(info.value) and "\n" not in str(info.value)


def test_a_var_file_that_never_ends_is_refused(tmp_path):
    (tmp_path / "doc.txt").symlink_to("/dev/zero")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"prompts": ["{{q}}"], "providers": ["echo"], "tests": [{"vars": {"q": "file://doc.txt"}}]}))
    with pytest.raises(ConfigError, match="is a device, not a file"):
        load_suite([str(cfg)])


def test_a_cell_a_line_or_a_var_file_past_the_limit_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "VALUE_LIMIT", 1000)
    monkeypatch.setattr(lines, "VALUE_LIMIT", 1000)
    monkeypatch.setattr(sources, "CSV_FIELD_LIMIT", 1000)
    import csv

    old = csv.field_size_limit()  # allow_large_csv_cells sets the module's limit: restored below
    try:
        rows = tmp_path / "rows.csv"
        rows.write_text('q,r\n"' + "x\n" * 600 + '",short\n')  # a quoted cell of 1,200 characters over lines
        cfg = tmp_path / "c.yaml"
        cfg.write_text(json.dumps({"prompts": ["{{q}}"], "providers": ["echo"], "tests": "file://rows.csv"}))
        with pytest.raises(ConfigError, match=r"rows.csv.*line \d+.*a cell is larger than the 64 MiB"):
            load_suite([str(cfg)])
        monkeypatch.setattr(sources, "READ_CHUNK", 100)  # the line is refused as it is read, never held whole
        rows.write_text("q\n" + "y" * 1500 + "\n")  # a line past the limit
        with pytest.raises(ConfigError, match="has a line longer than"):
            load_suite([str(cfg)])
        (tmp_path / "rows.jsonl").write_text('{"vars": {"q": "' + "z" * 1500 + '"}}\n')
        cfg.write_text(json.dumps({"prompts": ["{{q}}"], "providers": ["echo"], "tests": "file://rows.jsonl"}))
        with pytest.raises(ConfigError, match="has a line longer than"):
            load_suite([str(cfg)])
        (tmp_path / "doc.txt").write_text("w" * 1500)
        cfg.write_text(json.dumps({"prompts": ["{{q}}"], "providers": ["echo"], "tests": [{"vars": {"q": "file://doc.txt"}}]}))
        with pytest.raises(ConfigError, match="larger than the 64 MiB a value may hold"):
            load_suite([str(cfg)])
    finally:
        csv.field_size_limit(old)


# --filter-first-n N reads a streamed tests file no further than its first N tests (config/lines.ReadLimit)


def _rows_csv(path, n: int, bad: int | None = None, start: int = 0):
    """n rows of `q,__expected`; row `bad` (1-based) has a cell too many."""
    path.write_text("q,__expected\n" + "".join(
        f"question {i},contains:{i}{',too many' if bad == i - start + 1 else ''}\n" for i in range(start, start + n)))
    return path


def _eval(args: list, tmp_path):
    from typer.testing import CliRunner

    from factcli.cli import app

    out = tmp_path / f"out{len(list(tmp_path.glob('out*.json')))}.json"
    result = CliRunner().invoke(app, ["eval", *args, "-o", str(out), "--no-progress-bar", "--no-table", "--no-write"])
    return result, out


def _read_counter(monkeypatch) -> list:
    """The characters read from tests files, an item per time a file is read (sources.read_chunks)."""
    real, reads = sources.read_chunks, []

    def counted(*args):
        reads.append(0)
        for piece in real(*args):
            reads[-1] += len(piece)
            yield piece

    monkeypatch.setattr(sources, "read_chunks", counted)
    return reads


def test_filter_first_n_reads_a_csv_no_further_than_the_tests_it_keeps(tmp_path, monkeypatch):
    from conftest import result_rows

    monkeypatch.setattr(sources, "READ_CHUNK", 256)  # pieces small enough to see where reading stopped
    cfg = _config(tmp_path, 0)
    rows = _rows_csv(tmp_path / "rows.csv", 2000, bad=15)  # row N+5 is malformed
    reads = _read_counter(monkeypatch)
    result, out = _eval(["-c", cfg, "--filter-first-n", "10"], tmp_path)
    assert result.exit_code == 0, result.output
    first_11 = len("".join(rows.read_text().splitlines(keepends=True)[:12]))  # the header and 11 rows
    assert reads and max(reads) < first_11 + 256 and sum(reads) < rows.stat().st_size / 10  # each read stopped early
    kept = result_rows(out)
    assert [r["vars"]["q"] for r in kept] == [f"question {i}" for i in range(10)]

    reads.clear()
    result, _ = _eval(["-c", cfg], tmp_path)  # the whole file: the bad row stops the load
    assert result.exit_code == 1 and "rows.csv: row 15: row has 3 cells but the header has 2" in result.output
    assert max(reads) == len(rows.read_text())
    result, _ = _eval(["-c", cfg, "--filter-first-n", "15"], tmp_path)  # the bad row is among those kept
    assert result.exit_code == 1 and "row 15: row has 3 cells" in result.output

    # the same rows as when the whole (mended) file is read: --filter-pattern reads every row
    _rows_csv(rows, 2000)
    reads.clear()
    result, whole = _eval(["-c", cfg, "--filter-pattern", ".", "--filter-first-n", "10"], tmp_path)
    assert result.exit_code == 0 and max(reads) == len(rows.read_text())
    assert result_rows(whole) == kept


def test_filter_first_n_counts_tests_across_files_and_a_row_that_expands_is_one_test(tmp_path):
    from conftest import result_rows

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"d{i}.txt").write_text(f"question d{i}")
    (tmp_path / "a.csv").write_text("q,__expected\nfile://docs/*.txt,contains:question\n"
                                    + "".join(f"question {i},contains:{i}\n" for i in range(1, 6)))
    _rows_csv(tmp_path / "b.csv", 30, bad=8, start=100)  # its row 8 is the suite's test 6 + 8 = 14
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"prompts": ["Answer: {{q}}"], "providers": ["echo"], "tests": "file://*.csv"}))
    result, out = _eval(["-c", str(cfg), "--filter-first-n", "13"], tmp_path)
    assert result.exit_code == 0, result.output
    # a test is a row: the glob row's three files are three rows of one test (promptfoo's rule)
    got = [r["vars"]["q"] for r in result_rows(out)]
    assert got == [f"question d{i}" for i in range(3)] + [f"question {i}" for i in range(1, 6)] + [
        f"question {i}" for i in range(100, 107)]
    result, _ = _eval(["-c", str(cfg), "--filter-first-n", "14"], tmp_path)
    assert result.exit_code == 1 and "b.csv: row 8: row has 3 cells" in result.output


def test_filter_first_n_from_the_api_the_config_and_a_jsonl_file(tmp_path):
    import factcli

    lines_ = [json.dumps({"vars": {"q": f"question {i}"}}) for i in range(40)]
    lines_[11] = '{"vars": {"q": '  # line 12: not JSON
    (tmp_path / "rows.jsonl").write_text("\n".join(lines_) + "\n")
    config = {"prompts": ["Answer: {{q}}"], "providers": ["echo"], "tests": "file://rows.jsonl"}
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps(config))
    run = factcli.evaluate(str(cfg), store=False, filter_first_n=7)
    assert [r.step.vars["q"] for r in run.rows] == [f"question {i}" for i in range(7)]
    with pytest.raises(ConfigError, match=r"rows.jsonl: line 12: invalid JSON"):
        factcli.evaluate(str(cfg), store=False)
    cfg.write_text(json.dumps({**config, "commandLineOptions": {"filterFirstN": 11}}))
    result, out = _eval(["-c", str(cfg)], tmp_path)
    assert result.exit_code == 0, result.output
    assert len(json.loads(out.read_text())["results"]["results"]) == 11


def test_filters_that_pick_among_every_test_read_every_row(tmp_path):
    """--filter-pattern and a beforeAll hook see every test: a bad row anywhere stops the load."""
    cfg = _config(tmp_path, 0)
    _rows_csv(tmp_path / "rows.csv", 40, bad=30)
    result, _ = _eval(["-c", cfg, "--filter-first-n", "3", "--filter-pattern", "Row"], tmp_path)
    assert result.exit_code == 1 and "row 30: row has 3 cells" in result.output
    (tmp_path / "hooks.py").write_text("def hook(name, context):\n    return context\n")
    data = json.loads((tmp_path / "c.yaml").read_text())
    (tmp_path / "c.yaml").write_text(json.dumps({**data, "extensions": ["file://hooks.py:hook"]}))
    result, _ = _eval(["-c", cfg, "--filter-first-n", "3"], tmp_path)
    assert result.exit_code == 1 and "row 30: row has 3 cells" in result.output


def test_no_test_left_says_the_rest_was_not_read(tmp_path):
    cfg = _config(tmp_path, 40)
    result, _ = _eval(["-c", cfg, "--filter-first-n", "5", "--filter-sample", "0"], tmp_path)
    assert result.exit_code == 1
    assert ("no test is left to run (of 5 read: the tests files were read no further than --filter-first-n 5 "
            "keeps)") in result.output
