"""Users' promptfoo configs, held against what promptfoo 0.121.20 did with them (issue 42).

Each folder of tests/promptfoo_configs/ is a config promptfoo ran offline against tests/fake_openai.py;
`golden*.json` is its results JSON trimmed by trim.py (README.md there says how to make them again).
factcli runs the same folder and must give the same prompts, outputs and outcomes, except where
docs/promptfoo-departures.md says otherwise: each such place is asserted here as the departure it is.
"""

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app

CASES = Path(__file__).parent / "promptfoo_configs"
sys.path.insert(0, str(CASES))
from trim import trim  # noqa: E402

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="JavaScript runs in factcli's Node worker")
runner = CliRunner()


def _case(name: str, tmp_path: Path, monkeypatch) -> Path:
    folder = tmp_path / name
    shutil.copytree(CASES / name, folder)
    monkeypatch.chdir(folder)
    return folder


def _here(tmp_path: Path, monkeypatch, config: str, name: str = "promptfooconfig.yaml") -> Path:
    """A config written in an empty folder, the current directory."""
    monkeypatch.chdir(tmp_path)
    return write(tmp_path / name, config)


def _eval(*args: str, code: int | None = None):
    result = runner.invoke(app, ["eval", "--no-progress-bar", "--no-cache", "--no-write", *args])
    if code is not None:
        assert result.exit_code == code, result.output
    return result


def _ours(path: str) -> dict:
    return trim(json.loads(Path(path).read_text()))


def _golden(name: str, file: str = "golden.json") -> dict:
    return json.loads((CASES / name / file).read_text())


def _label(provider: dict) -> str:
    return provider.get("label") or ""  # factcli writes null where promptfoo writes ''


# ------------------------------------------------------------------ prompts from files


def test_every_prompt_form_reads_the_files_promptfoo_reads(tmp_path, monkeypatch):
    """`file://p.txt`, a bare path, `{id: …}`, `{raw: file://…}` and `{raw: bare/path}` (promptfoo reads raw
    as it reads id: the file's text is sent, not the string `file://prompt.txt`), inline `{raw, label}`,
    globs, .md and .j2 (one prompt, trailing newline kept), .json and .yaml (compact JSON), .jsonl (a
    prompt per line, labelled), a Python prompt function as a string and as `{raw: file://pf.py:fn}`:
    the same labels, raws and outputs as promptfoo. A label on a glob is dropped by both; factcli says so."""
    _case("prompt_forms", tmp_path, monkeypatch)
    result = _eval("-o", "ours.json", code=0)
    assert "prompts[7].label (and 1 more like it): a label on a glob is not used" in " ".join(result.output.split())
    ours, golden = _ours("ours.json"), _golden("prompt_forms")
    pairs = sorted((p["label"], p["raw"]) for p in ours["prompts"])
    assert pairs == sorted((p["label"], p["raw"]) for p in golden["prompts"])  # globs: promptfoo's order is the OS's
    assert "file://prompt.txt" not in json.dumps(ours)  # never sent as text

    def outputs(doc: dict) -> list:
        labels = [p["label"] for p in doc["prompts"]]
        # a chat prompt (JSON messages) is echoed 2-space indented by promptfoo, compact by factcli: the
        # messages are the same (docs/promptfoo-departures.md)
        return sorted((labels[r["promptIdx"]], json.loads(r["output"]) if r["output"].startswith("[") else r["output"])
                      for r in doc["results"])

    assert outputs(ours) == outputs(golden)


def test_prompt_csv_files_give_a_prompt_per_row_as_in_promptfoo(tmp_path, monkeypatch):
    """`file://x.csv` as promptfoo reads it (src/prompts/processors/csv.ts): a `prompt,label` CSV (quoted
    cells, a multi-line cell, trimmed cells, blank and whitespace lines and an empty prompt skipped, an
    empty label `Prompt N - …`), a `prompt`-only file without a comma (its header line skipped), a file
    without a header (each line, spaces kept), one column with commas in quoted cells, a file of rows of
    another width (each line a prompt, the header too: factcli warns), another delimiter (each line), a
    config label on every row without a `label` cell. Before: each file was one prompt, 16 rows of 50."""
    _case("prompt_csv", tmp_path, monkeypatch)
    result = _eval("-o", "ours.json", code=0)
    assert ("prompts[4]: ragged.csv: line 3 has 3 cells but the header has 2, so each line is a prompt, as promptfoo "
            "reads it") in " ".join(result.output.split())
    ours, golden = _ours("ours.json"), _golden("prompt_csv")
    assert [(p["label"], p["raw"]) for p in ours["prompts"]] == [(p["label"], p["raw"]) for p in golden["prompts"]]
    assert len(golden["prompts"]) == 25 and len(golden["results"]) == 50
    keys = ("testIdx", "promptIdx", "success", "score", "output")
    assert [[r[k] for k in keys] for r in ours["results"]] == [[r[k] for k in keys] for r in golden["results"]]


# ------------------------------------------------------------------ JavaScript providers


@needs_node
def test_javascript_providers_answer_as_in_promptfoo(tmp_path, monkeypatch):
    """A class (.js CommonJS, .mjs default export, .cjs) made once with {id, config: {…, basePath}} and
    given its label after; callApi(prompt, context) sees the rendered prompt, the vars and the prompt
    as written; its output, tokenUsage, cost and metadata are the row's."""
    _case("js_providers", tmp_path, monkeypatch)
    _eval("-o", "ours.json", code=0)
    ours, golden = _ours("ours.json"), _golden("js_providers")
    assert len(ours["results"]) == len(golden["results"]) == 4
    for mine, theirs in zip(ours["results"], golden["results"]):
        for key in ("success", "failureReason", "score", "error", "reason"):
            assert mine[key] == theirs[key], (key, mine, theirs)
        assert (mine["metadata"] or None) == theirs["metadata"]
        # no tokenUsage reported: promptfoo writes none, factcli zeros
        assert mine["tokenUsage"] == (theirs["tokenUsage"] or {"total": 0, "prompt": 0, "completion": 0})
        # a cost the provider does not report: promptfoo writes 0, factcli null (contract §6)
        assert mine["cost"] == (theirs["cost"] or None)
        assert _label(mine["provider"]) == _label(theirs["provider"])
        if theirs["provider"]["id"] != "esm-provider":  # promptfoo shows what id() returns; factcli the id written
            assert mine["provider"]["id"] == theirs["provider"]["id"]
        if theirs["output"].startswith("{"):
            a, b = json.loads(mine["output"]), json.loads(theirs["output"])
            # basePath is the config's folder as the command line named it: "" for promptfoo's default
            # config, "." for factcli (docs/promptfoo-departures.md)
            assert a["config"].pop("basePath") == "." and b["config"].pop("basePath") == ""
            assert a == b
        else:
            assert mine["output"] == theirs["output"]


@needs_node
def test_javascript_provider_failures_are_error_rows_that_say_what_happened(tmp_path, monkeypatch):
    _case("js_providers", tmp_path, monkeypatch)
    _eval("-c", "errors.yaml", "-o", "ours.json", code=100)
    ours, golden = _ours("ours.json")["results"], _golden("js_providers", "golden_errors.json")["results"]
    throw, told, string, undef, obj = ours
    assert golden[0]["error"] == "Error: boom from provider" and throw["failureReason"] == 2
    assert throw["error"] == "p_err.js: callApi threw Error: boom from provider"  # then the user's stack
    assert told["error"] == golden[1]["error"] == "told error" and told["failureReason"] == golden[1]["failureReason"]
    # promptfoo: a bare string is a failed row ("No output"); undefined a TypeError from its own code
    assert (golden[2]["failureReason"], golden[2]["error"]) == (0, "No output")
    assert golden[3]["error"].startswith("TypeError: Cannot convert undefined")
    for row, shown in ((string, '"just a string"'), (undef, "undefined")):
        assert row["failureReason"] == 2
        assert row["error"] == ("p_err.js: callApi must return an object such as {output: ...} (or {error: ...}), "
                                f"got {shown}")
    assert obj["output"] == golden[4]["output"] == {"nested": 1} and obj["success"] is golden[4]["success"] is True


@needs_node
def test_a_javascript_grader_grades_as_in_promptfoo(tmp_path, monkeypatch):
    _case("grader_js", tmp_path, monkeypatch)
    _eval("-o", "ours.json", code=100)
    ours, golden = _ours("ours.json")["results"], _golden("grader_js")["results"]
    for mine, theirs in zip(ours, golden):
        for key in ("success", "score", "reason"):
            assert mine[key] == theirs[key], (key, mine, theirs)


# ------------------------------------------------------------------ context.provider.label


@needs_node
def test_prompt_functions_get_an_empty_label_for_an_unlabelled_provider(fake_openai, tmp_path, monkeypatch):
    _case("provider_label", tmp_path, monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    _eval("-o", "ours.json", code=0)
    ours, golden = _ours("ours.json")["results"], _golden("provider_label")["results"]

    def outputs(rows):
        return sorted((r["provider"]["id"], _label(r["provider"]), r["output"]) for r in rows)

    assert outputs(ours) == outputs(golden)
    assert 'JS {"id":"echo","label":""} vars,provider,config' in [r["output"] for r in ours]


# ------------------------------------------------------------------ configs without prompts


def test_a_config_without_prompts_sends_each_tests_prompt_var(fake_openai, tmp_path, monkeypatch):
    _case("no_prompts", tmp_path, monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    result = _eval("-o", "ours.json", code=0)
    assert "warning" not in result.output  # every test has a `prompt` var: promptfoo does not warn either
    ours, golden = _ours("ours.json"), _golden("no_prompts")
    assert [(p["label"], p["raw"]) for p in ours["prompts"]] == [("{{prompt}}", "{{prompt}}")] * 2
    assert [(p["label"], p["raw"]) for p in golden["prompts"]] == [("{{prompt}}", "{{prompt}}")] * 2
    assert sorted(r["output"] for r in ours["results"]) == sorted(r["output"] for r in golden["results"])


def test_without_prompts_or_a_prompt_var_promptfoo_warns_and_factcli_refuses(tmp_path, monkeypatch):
    """promptfoo 0.121.20 warns `Expected top-level "prompts" property in config or a test variable named
    "prompt"` and sends an empty prompt; factcli gives the same warning's sense and its preflight refuses a
    prompt that renders empty for every test (docs/promptfoo-departures.md)."""
    _here(tmp_path, monkeypatch, "providers: [echo]\ntests:\n  - vars: {question: hi}\n")
    result = _eval(code=1)
    text = " ".join(result.output.split())
    assert "no 'prompts:': each test's 'prompt' var is sent ({{prompt}}, as promptfoo does), but no test has one" in text
    assert "'{{prompt}}' renders empty for every test" in text


# ------------------------------------------------------------------ derived metrics in JavaScript


@needs_node
def test_derived_metrics_written_in_javascript_run_in_node(tmp_path, monkeypatch):
    """promptfoo 0.121.20 hands every string to mathjs: a JavaScript body, function or arrow throws there
    and the metric stays 0 (golden). factcli runs them in its Node worker with promptfoo's arguments
    (the column's named scores with __count, and the row's step); mathjs expressions are the same."""
    _case("derived_js", tmp_path, monkeypatch)
    _eval("-o", "ours.json", code=100)
    ours = _ours("ours.json")["prompts"][0]["namedScores"]
    golden = _golden("derived_js")["prompts"][0]["namedScores"]
    assert golden == {"acc": 1, "math": 0.5, "jsbody": 0, "jsfunc": 0, "arrow": 0, "after": 1}
    assert ours == {"acc": 1, "math": 0.5, "jsbody": 0.5, "jsfunc": 10, "arrow": 2, "after": 1}


@needs_node
def test_a_javascript_derived_metric_that_throws_keeps_its_previous_value(tmp_path, monkeypatch):
    _here(tmp_path, monkeypatch, name="c.yaml", config="""
prompts: ['{{w}}']
providers: [echo]
tests:
  - {vars: {w: a}, assert: [{type: contains, value: a, metric: acc}]}
  - {vars: {w: b}, assert: [{type: contains, value: b, metric: other}]}
derivedMetrics:
  - {name: first_only, value: "if (namedScores.__count > 1) throw new Error('no'); return 7"}
  - {name: step, value: "return evalStep.testIdx * 10 + namedScores.__count"}
""")
    _eval("-c", "c.yaml", "-o", "ours.json", code=0)
    assert _ours("ours.json")["prompts"][0]["namedScores"] == {"acc": 1, "other": 1, "first_only": 7, "step": 12}


@needs_node
def test_a_javascript_derived_metric_that_does_not_compile_is_refused_before_any_call(tmp_path, monkeypatch):
    _here(tmp_path, monkeypatch, name="c.yaml",
          config="prompts: [hi]\nproviders: [echo]\nderivedMetrics: [{name: bad, value: 'return namedScores.a +'}]\n")
    result = _eval("-c", "c.yaml", code=1)
    assert "c.yaml: derivedMetrics[0].value: JavaScript does not compile: SyntaxError" in " ".join(result.output.split())


# ------------------------------------------------------------------ commandLineOptions


def test_command_line_options_in_the_config(tmp_path, monkeypatch):
    """promptfoo 0.121.20 reads repeat and maxConcurrency from this config (6 rows) but not filterFirstN,
    filterPattern, output or description (checked: they change nothing). factcli honours every option it
    has, below the command line: the pattern keeps tests 'first' and 'third' (the first 2 of those), each
    twice, and the results go to clo/out.json; `verbose` is one warning."""
    _case("cli_options", tmp_path, monkeypatch)
    golden = _golden("cli_options")["results"]
    assert [r["output"] for r in golden] == ["Say a", "Say a", "Say b", "Say b", "Say c", "Say c"]
    result = _eval(code=0)
    text = " ".join(result.output.split())
    assert "commandLineOptions.verbose: not an option of factcli (set FACTCLI_DEBUG=1 for debug output; ignored)" in text
    assert "Wrote clo/out.json" in text
    ours = _ours("clo/out.json")["results"]
    assert [r["output"] for r in ours] == [r["output"] for r in golden if r["output"] != "Say b"]
    assert [r["testIdx"] for r in ours] == [0, 1, 2, 3]
    # the command line wins
    _eval("--filter-first-n", "3", "--filter-pattern", ".", "--repeat", "1", "-o", "cli.json", code=0)
    assert [r["output"] for r in _ours("cli.json")["results"]] == ["Say a", "Say b", "Say c"]
    assert not Path("clo/out.json").with_name("cli.json").exists()


def test_a_command_line_option_of_the_wrong_type_is_a_config_error(tmp_path, monkeypatch):
    _here(tmp_path, monkeypatch, "prompts: [hi]\nproviders: [echo]\ncommandLineOptions: {maxConcurrency: many}\n")
    result = _eval(code=1)
    assert result.output.startswith("error: ") and ("promptfooconfig.yaml: commandLineOptions.maxConcurrency: expected "
                                                    "a whole number of at least 1, got 'many'") in result.output
    write(tmp_path / "promptfooconfig.yaml", "prompts: [hi]\nproviders: [echo]\ncommandLineOptions: {maxConcurency: 2}\n")
    result = _eval(code=1)
    assert "unknown option 'maxConcurency' (did you mean 'maxConcurrency'?)" in result.output


# ------------------------------------------------------------------ outputPath


def test_output_path_is_written_where_promptfoo_writes_it(tmp_path, monkeypatch):
    """Relative to the current directory (not the config's folder), folders made, `.txt` written as YAML;
    the same rows as promptfoo's file."""
    folder = _case("output_path", tmp_path, monkeypatch)
    _eval("-c", "sub/promptfooconfig.yaml", code=100)
    golden = _golden("output_path")
    json_rows = _ours("out/deep/results.json")["results"]
    txt_rows = trim(yaml.safe_load((folder / "res" / "results.txt").read_text()))["results"]
    for rows in (json_rows, txt_rows):
        assert [(r["success"], r["score"], r["output"], r["reason"]) for r in rows] == [
            (r["success"], r["score"], r["output"], r["reason"]) for r in golden["results"]]
    assert not (folder / "sub" / "out").exists()


def test_o_replaces_the_config_output_path_and_makes_its_folders(tmp_path, monkeypatch):
    folder = _case("output_path", tmp_path, monkeypatch)
    result = _eval("-c", "sub/promptfooconfig.yaml", "-o", "new/dir/x.csv", "-o", "new/y.yml", code=100)
    assert "Wrote new/dir/x.csv" in result.output and "Wrote new/y.yml" in result.output
    assert (folder / "new" / "dir" / "x.csv").is_file() and (folder / "new" / "y.yml").is_file()
    assert not (folder / "out").exists() and not (folder / "res").exists()


def test_an_output_path_without_a_format_runs_and_writes_nothing(tmp_path, monkeypatch):
    """promptfoo 0.121.20 runs the eval, then fails writing `output` ("Unsupported output file format")
    and exits 1 with nothing written; factcli says so before any call, runs, and keeps the run's exit code.
    `-o output` is refused before any call by both."""
    _here(tmp_path, monkeypatch, "prompts: [hi]\nproviders: [echo]\noutputPath: [output, kept.json]\n")
    result = _eval(code=0)
    text = " ".join(result.output.split())
    assert "warning: outputPath output: unknown format: name the file with one of .json," in text
    assert "nothing will be written to it (promptfoo 0.121.20 runs the eval, then fails writing it)" in text
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "factcli-home") == ["kept.json",
                                                                                       "promptfooconfig.yaml"]
    result = _eval("-o", "output", code=1)
    assert result.output.startswith("error: -o output: unknown format")


def test_an_output_path_under_a_file_is_refused_before_any_call(tmp_path, monkeypatch):
    _here(tmp_path, monkeypatch, "prompts: [hi]\nproviders: [echo]\noutputPath: blocker/r.json\n")
    write(tmp_path / "blocker", "a file")
    result = _eval(code=1)
    assert "outputPath blocker/r.json: blocker is a file, not a folder" in " ".join(result.output.split())


def test_several_configs_write_every_output_path(tmp_path, monkeypatch):
    """promptfoo concatenates the outputPath of every -c file."""
    _here(tmp_path, monkeypatch, "prompts: [hi]\nproviders: [echo]\noutputPath: a/out.json\n", name="a.yaml")
    write(tmp_path / "b.yaml", "outputPath: [b/out.csv]\n")
    _eval("-c", "a.yaml", "-c", "b.yaml", code=0)
    assert (tmp_path / "a" / "out.json").is_file() and (tmp_path / "b" / "out.csv").is_file()
