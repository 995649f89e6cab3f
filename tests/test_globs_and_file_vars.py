"""Globs and `file://` values (promptfoo-features §5): a var whose value is a glob gives one row per file,
a `file://` var value by its extension, test-level `vars:` files, `tests:` and `prompts:` globs; globs
are sorted, and one that matches nothing is an error naming it."""

import json
import sys
import types

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.config.loader import load_suite
from factcli.config.plan import expand
from factcli.errors import ConfigError

runner = CliRunner()
PROVIDER = '{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


def _eval(tmp_path, config: str) -> list[dict]:
    cfg = write(tmp_path / "c.yaml", config)
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "-c", str(cfg), "-o", str(out), "--no-progress-bar", "--no-cache"])
    assert result.exit_code in (0, 100), result.output
    return json.loads(out.read_text())["results"]["results"]


def _sent(fake_openai) -> list[str]:
    return [r["json"]["messages"][-1]["content"] for r in fake_openai.requests]


def _suite(tmp_path, body: str):
    return load_suite([write(tmp_path / "c.yaml", "prompts: ['{{ v }}']\nproviders: [echo]\n" + body)])


def _rows(suite) -> list[dict]:
    return [step.vars for step in expand(suite)[1]]


def _error(tmp_path, body: str) -> str:
    with pytest.raises(ConfigError) as info:
        _suite(tmp_path, body)
    assert "\n" not in str(info.value)
    return str(info.value)


# ---------------------------------------------------------------- a var whose value is a glob


def test_a_glob_var_gives_one_row_per_file_sorted_and_reaches_the_model(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("1.txt", "2.txt", "10.txt", "a.txt", "B.txt"):
        write(tmp_path / "articles" / name, f"  Article {name[:-4]} text\n\n")
    write(tmp_path / "articles/subdir/inner.txt", "not matched: * does not descend")
    rows = _eval(tmp_path, f"""
prompts: ["Summarize: {{{{ article }}}}"]
providers: [{PROVIDER}]
tests:
  - description: articles
    vars:
      article: file://articles/*
    assert: [{{type: contains, value: "{{{{ article }}}}"}}]
""")
    # sorted by path (code point): the same order on every machine; the folder is skipped
    assert _sent(fake_openai) == [f"Summarize: Article {n} text" for n in ("1", "10", "2", "B", "a")]
    assert [r["testIdx"] for r in rows] == [0, 1, 2, 3, 4]
    assert {r["testCase"]["description"] for r in rows} == {"articles"}
    assert all(r["success"] for r in rows)  # the assertion sees the loaded text


def test_several_glob_vars_and_lists_make_the_cartesian_product(tmp_path):
    write(tmp_path / "a/x.txt", "X")
    write(tmp_path / "a/y.txt", "Y")
    write(tmp_path / "s/one.md", "one")
    write(tmp_path / "s/two.md", "two")
    suite = _suite(tmp_path, "tests:\n  - vars: {v: 'file://a/*.txt', s: 'file://s/{one,two}.md', n: [p, q]}\n")
    assert [(r["v"], r["s"], r["n"]) for r in _rows(suite)] == [
        (v, s, n) for v in "XY" for s in ("one", "two") for n in "pq"]


def test_a_written_list_of_files_gives_one_row_per_file(tmp_path):
    write(tmp_path / "a.txt", "text\n")
    write(tmp_path / "b.json", '{"k": [1, 2]}')
    write(tmp_path / "g/1.md", "g1")
    write(tmp_path / "g/2.md", "g2")
    suite = _suite(tmp_path, "tests:\n  - vars: {v: ['file://a.txt', 'file://b.json', 'file://g/*.md', plain]}\n")
    assert [r["v"] for r in _rows(suite)] == ["text", {"k": [1, 2]}, "g1", "g2", "plain"]


def test_disable_var_expansion_keeps_the_files_as_one_list(tmp_path):
    write(tmp_path / "a/x.txt", "X")
    write(tmp_path / "a/y.txt", "Y")
    suite = _suite(tmp_path, "tests:\n  - vars: {v: 'file://a/*'}\n    options: {disableVarExpansion: true}\n")
    assert _rows(suite) == [{"v": ["X", "Y"]}]


def test_a_glob_var_in_default_test_expands_every_test(tmp_path):
    write(tmp_path / "a/x.txt", "X")
    write(tmp_path / "a/y.txt", "Y")
    suite = _suite(tmp_path, "defaultTest: {vars: {v: 'file://a/*.txt'}}\ntests: [{vars: {n: 1}}, {vars: {n: 2}}]\n")
    assert [(r["n"], r["v"]) for r in _rows(suite)] == [(1, "X"), (1, "Y"), (2, "X"), (2, "Y")]


@pytest.mark.parametrize("value, expected", [
    ("file://articles/*.txt", "no files match '{base}/articles/*.txt'"),
    ("file://nope/missing.txt", "file not found: {base}/nope/missing.txt"),
    ("file://articles", "articles is a folder, not a file (for one row per file in it, use a glob"),
])
def test_a_var_file_or_glob_that_matches_nothing_is_an_error(tmp_path, value, expected):
    (tmp_path / "articles").mkdir()
    message = _error(tmp_path, f"tests:\n  - vars: {{v: '{value}'}}\n")
    assert "c.yaml: tests[0].vars.v: " in message and expected.format(base=tmp_path) in message


# ---------------------------------------------------------------- a file:// var value, by extension


def test_each_extension_gives_its_value(tmp_path):
    files = {"t.txt": "  First line\nSecond with {{ name }}\n\n", "m.md": "# Title\n\nBody\n", "c.csv": "a,b\n1,2\n",
             "j.json": '{\n  "a": 1,\n  "b": [1, 2]\n}\n', "y.yaml": "a: 1\nb: [x, y]\n", "s.yaml": "UN resolution title\n",
             "noext": "no extension\n"}
    for name, text in files.items():
        write(tmp_path / name, text)
    (tmp_path / "i.png").write_bytes(PNG)
    (tmp_path / "wrong.jpg").write_bytes(PNG)  # the bytes say PNG: the MIME type follows them
    (tmp_path / "a.mp3").write_bytes(b"ID3")
    names = list(files) + ["i.png", "wrong.jpg", "a.mp3"]
    suite = _suite(tmp_path, "tests:\n  - vars: {" + ", ".join(f"'{n}': 'file://{n}'" for n in names) + "}\n")
    [test] = suite.tests
    assert test.vars["t.txt"] == "First line\nSecond with {{ name }}"  # trimmed, never rendered
    assert test.vars["m.md"] == "# Title\n\nBody"
    assert test.vars["c.csv"] == "a,b\n1,2"
    assert test.vars["j.json"] == {"a": 1, "b": [1, 2]}
    assert test.vars["y.yaml"] == {"a": 1, "b": ["x", "y"]}
    assert test.vars["s.yaml"] == "UN resolution title"
    assert test.vars["noext"] == "no extension"
    assert test.vars["i.png"] == "data:image/png;base64,iVBORw0KGgoAAAAAAAAAAA=="
    assert test.vars["wrong.jpg"].startswith("data:image/png;base64,")
    assert test.vars["a.mp3"] == "SUQz"
    assert not test.template_vars  # values read from files are data


def test_file_values_reach_the_model_as_data(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(tmp_path / "note.txt", "Hello {{ name }}\n")
    write(tmp_path / "doc.json", '{"title": "T", "n": 2}')
    _eval(tmp_path, f"""
prompts: ["[{{{{ note }}}}] [{{{{ doc.title }}}}] [{{{{ doc }}}}]"]
providers: [{PROVIDER}]
tests:
  - vars: {{note: file://note.txt, doc: file://doc.json, name: Ann}}
""")
    assert _sent(fake_openai) == ['[Hello {{ name }}] [T] [{"title":"T","n":2}]']


def test_a_pdf_needs_pypdf(tmp_path, monkeypatch):
    (tmp_path / "d.pdf").write_bytes(b"%PDF-1.4")
    monkeypatch.setitem(sys.modules, "pypdf", None)  # not installed
    assert "tests[0].vars.v: reading the text of d.pdf needs pypdf: pip install pypdf" in \
        _error(tmp_path, "tests:\n  - vars: {v: file://d.pdf}\n")

    class Page:
        def __init__(self, text):
            self.text = text

        def extract_text(self):
            return self.text

    fake = types.SimpleNamespace(PdfReader=lambda path: types.SimpleNamespace(pages=[Page(" Hello PDF "), Page("p2")]))
    monkeypatch.setitem(sys.modules, "pypdf", fake)
    assert _suite(tmp_path, "tests:\n  - vars: {v: file://d.pdf}\n").tests[0].vars == {"v": "Hello PDF\n\np2"}


def test_a_broken_json_var_file_names_that_file(tmp_path):
    write(tmp_path / "bad.json", "{nope")
    assert f"{tmp_path / 'bad.json'}: invalid JSON: line 1, column 2" in \
        _error(tmp_path, "tests:\n  - vars: {v: file://bad.json}\n")


# ---------------------------------------------------------------- test-level vars: files


def test_vars_as_a_file_a_list_or_a_glob(tmp_path):
    write(tmp_path / "vars/v_one.yaml", "topic: from-one\nstyle: one\n")
    write(tmp_path / "vars/v_two.yaml", "style: two\nextra: only-in-two\n")
    suite = _suite(tmp_path, """tests:
  - vars: [vars/v_one.yaml, vars/v_two.yaml]
  - vars: [vars/v_two.yaml, vars/v_one.yaml]
  - vars: file://vars/v_*.yaml
  - vars: vars/v_one.yaml
""")
    assert [t.vars for t in suite.tests] == [
        {"topic": "from-one", "style": "two", "extra": "only-in-two"},  # later files win
        {"style": "one", "extra": "only-in-two", "topic": "from-one"},
        {"topic": "from-one", "style": "two", "extra": "only-in-two"},  # sorted: v_one, then v_two
        {"topic": "from-one", "style": "one"},
    ]


def test_vars_files_in_a_test_file_are_relative_to_it(tmp_path):
    write(tmp_path / "vars/vars_a.yaml", "v: from-vars-file\n")
    write(tmp_path / "tests/t1.yaml", "- vars: ../vars/vars_*.yaml\n")
    suite = _suite(tmp_path, "tests: file://tests/t1.yaml\n")
    assert suite.tests[0].vars == {"v": "from-vars-file"}


@pytest.mark.parametrize("spec, expected", [
    ("file://vars/none_*.yaml", "tests[0].vars: no files match"),
    ("[vars/ok.yaml, vars/missing.yaml]", "tests[0].vars[1]: file not found:"),
    ("vars/list.yaml", "list.yaml: a vars file must hold a mapping of variables, got list"),
])
def test_vars_file_errors(tmp_path, spec, expected):
    write(tmp_path / "vars/ok.yaml", "a: 1\n")
    write(tmp_path / "vars/list.yaml", "- a\n")
    assert expected in _error(tmp_path, f"tests:\n  - vars: {spec}\n")


# ---------------------------------------------------------------- tests: and prompts: globs


def test_tests_from_a_glob_of_files_sorted(tmp_path):
    write(tmp_path / "tests/t1.yaml", "- vars: {v: yaml}\n")
    write(tmp_path / "tests/t2.json", '[{"vars": {"v": "json"}}]')
    write(tmp_path / "tests/t3.jsonl", '{"vars": {"v": "jsonl-1"}}\n{"vars": {"v": "jsonl-2"}}\n')
    write(tmp_path / "tests/t4.csv", "v\ncsv\n")
    suite = _suite(tmp_path, "tests:\n  - file://tests/*\n  - tests/t1.yaml\n")
    assert [t.vars["v"] for t in suite.tests] == ["yaml", "json", "jsonl-1", "jsonl-2", "csv", "yaml"]
    assert suite.tests[4].description == "Row #1"
    assert [t.vars["v"] for t in _suite(tmp_path, "tests: tests/t{1,4}.*\n").tests] == ["yaml", "csv"]


def test_tests_glob_errors(tmp_path):
    write(tmp_path / "tests/t.txt", "x")
    write(tmp_path / "tests/t.xlsx", "x")
    assert "tests[0]: no files match" in _error(tmp_path, "tests:\n  - file://tests/none_*.yaml\n")
    assert "tests: unsupported test file type: t.txt" in _error(tmp_path, "tests: file://tests/t.txt\n")
    assert "t.xlsx (save it as CSV)" in _error(tmp_path, "tests: file://tests/t.xlsx\n")


def test_prompt_globs_are_sorted_and_must_match(tmp_path):
    write(tmp_path / "prompts/b.txt", "B {{ v }}")
    write(tmp_path / "prompts/a.txt", "A {{ v }}")
    write(tmp_path / "prompts/c.md", "C {{ v }}")
    cfg = write(tmp_path / "c.yaml", "prompts: ['file://prompts/*.{txt,md}']\nproviders: [echo]\n")
    assert [p.raw for p in load_suite([cfg]).prompts] == ["A {{ v }}", "B {{ v }}", "C {{ v }}"]
    cfg = write(tmp_path / "c.yaml", "prompts: ['file://nomatch/*.txt']\nproviders: [echo]\n")
    with pytest.raises(ConfigError, match=r"prompts\[0\]: no files match '.*nomatch/\*\.txt'"):
        load_suite([cfg])
