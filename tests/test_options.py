"""One typed options object from the flag to where each option acts (issue 43, run/options.py): every
option is a field with its Option; `factcli eval`'s flags, evaluate()'s keywords, a stored run's options
record and what --resume does with each are derived from those fields, so that none can drift from them."""

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.config import cli_options
from factcli.run import options as opts
from factcli.run.api import parse_options
from factcli.run.flow import Flow
from factcli.run.options import KEEP, REFUSE, RESTORE, EvalOptions, RunOptions

runner = CliRunner()
CONFIG = "prompts: ['Say {{w}}']\nproviders: [echo]\ntests:\n" + "".join(
    f"  - vars: {{w: w{i}}}\n    assert: [{{type: contains, value: w{i}}}]\n" for i in range(4))


def cli(*args):
    return runner.invoke(app, [*map(str, args)])


def _fields():
    return list(opts.option_fields())


def test_every_field_is_an_option_and_every_name_is_one_option():
    """A field added without its Option (flag, API keyword, record, resume) fails here; names are unique
    across EvalOptions and RunOptions, since keywords and commandLineOptions name fields alone."""
    names = [f.name for f, _ in _fields()]
    assert len(names) == len(set(names))
    for f, _ in _fields():
        assert isinstance(f.metadata.get("option"), opts.Option), f"{f.name}: declare it with run/options.option()"
        m = opts.meta(f)
        assert m.resume in (None, REFUSE, RESTORE, KEEP), f.name
        if m.resume in (RESTORE, KEEP):  # taken back from the store: it must be in the record
            assert m.record is not None, f"{f.name}: --resume takes it from the record, which lacks it"


def test_every_flag_of_factcli_eval_is_an_option_field():
    """The CLI signature and the options type name the same options (a flag without a field, or a
    field naming a flag `factcli eval` lacks, fails)."""
    import typer.main

    command = typer.main.get_command(app).commands["eval"]
    spelled = {o for p in command.params for o in p.opts}
    flags = [opts.meta(f).flag for f, _ in _fields() if opts.meta(f).flag]
    assert set(flags) <= spelled
    assert len(flags) == len(command.params)  # one field each


SAMPLES = {"count": 2, "amount": 1.5, "flag": False, "text": "x", "mapping": {"a": 1}, "grader": "echo",
           "store": "runs.db", "paths": "out.json"}


def test_every_keyword_of_evaluate_is_an_option_field():
    """evaluate()'s keywords are the fields whose Option has an api kind (and promptfoo's spellings):
    each is taken, checked, and lands in its field."""
    keywords = opts.api_keywords()
    assert {"max_concurrency", "maxConcurrency", "repeat", "delay_ms", "delay", "cache", "grader", "vars",
            "max_cost", "maxCost", "filter_pattern", "filterFirstN", "description", "store", "db", "outputs",
            "outputPath"} <= set(keywords)
    for key, (f, owner) in keywords.items():
        parsed = parse_options(None, {key: SAMPLES[opts.meta(f).api]})
        value = opts.value_of(parsed, f, owner)
        assert value != opts._default(f) and value is not None, key
    with pytest.raises(Exception, match="unknown option 'max_concurency'.*max_concurrency"):
        parse_options(None, {"max_concurency": 2})


def test_every_keyword_of_evaluate_is_documented():
    doc = (Path(__file__).parent.parent / "docs" / "python-api.md").read_text(encoding="utf-8")
    for f, _ in _fields():
        if opts.meta(f).api is not None:
            assert f"`{f.name}" in doc, f"docs/python-api.md: evaluate()'s {f.name} is not documented"


def test_every_command_line_option_of_a_config_sets_a_field():
    names = {f.name for f, _ in _fields()}
    for key, (name, _, _) in cli_options.HONOURED.items():
        assert name in names, f"commandLineOptions.{key} sets {name}, which is no option"


def test_the_config_fills_what_the_command_line_left_unset(tmp_path):
    cfg = {cli_options.KEY: {"maxConcurrency": 3, "repeat": 2, "cache": False, "table": False, "write": False,
                             "var": {"a": "config", "b": "config"}, "envPath": [".env"], "output": ["o.json"]}}
    values = cli_options.values([(tmp_path / "c.yaml", cfg)])
    given = EvalOptions(run=RunOptions(repeat=5, vars={"a": "cli"}), progress_bar=False)
    o = given.filled(values)
    assert (o.run.max_concurrency, o.run.repeat, o.run.cache) == (3, 5, False)  # the command line's repeat wins
    assert o.run.vars == {"a": "cli", "b": "config"}  # merged, the command line's first
    assert (o.table, o.store, o.progress_bar) == (False, False, False)
    assert o.env_files == [tmp_path / ".env"] and o.outputs == [Path("o.json")]
    # a switch the command line turned on stays on; `cache: true` leaves the option unset
    on = EvalOptions(run=RunOptions(cache=False), store=False).filled(
        cli_options.values([(tmp_path / "c.yaml", {cli_options.KEY: {"cache": True, "write": True}})]))
    assert (on.run.cache, on.store) == (False, False)
    assert EvalOptions().filled(cli_options.values([(tmp_path / "c.yaml", {cli_options.KEY: {"cache": True}})])) \
        == EvalOptions()


def test_a_stored_run_records_every_option_and_a_resume_takes_them_back(tmp_path, isolated_home, monkeypatch):
    """Every option with a record key is in the stored run's options record, as given; --resume takes
    back those it restores or keeps (the options the resumed flow runs with), and a flag given now
    wins over a kept one."""
    monkeypatch.chdir(tmp_path)
    cfg = write(tmp_path / "c.yaml", CONFIG.replace("value: w3", "value: nope"))
    assert cli("eval", "-c", cfg, "--no-progress-bar", "--var", "x=1").exit_code == 100  # (failing: test 3)
    given = ["-j", "3", "--repeat", "2", "--no-cache", "--var", "x=1", "--grader", "echo", "--max-cost", "5",
             "-r", "echo", "--filter-pattern", ".*", "--filter-first-n", "3", "--filter-sample", "3",
             "--filter-failing", "latest", "-o", "out.json", "--batch"]
    stored = cli("eval", "-c", cfg, "--no-progress-bar", *given)
    assert stored.exit_code == 100, stored.output
    with sqlite3.connect(isolated_home / "factcli.db") as conn:
        (first, _), (run_id, record) = conn.execute("SELECT id, options_json FROM runs ORDER BY rowid").fetchall()
        record = json.loads(record)
        conn.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (run_id,))
    expected = {"max_concurrency": 3, "repeat": 2, "no_cache": True, "vars": {"x": "1"}, "grader": "echo",
                "max_cost": 5.0, "providers": ["echo"], "filter_pattern": ".*", "filter_first_n": 3,
                "filter_sample": 3, "filter_failing": first, "outputs": [str(tmp_path / "out.json")],
                "assertions": None, "model_outputs": None, "delay_ms": None, "batch": True}
    assert {opts.meta(f).record for f, _ in _fields() if opts.meta(f).record} == set(expected)
    assert {k: record[k] for k in expected} == expected
    seen = []
    prepare = Flow.prepare

    def spy(self):
        run = prepare(self)
        seen.append(self.options)
        return run

    monkeypatch.setattr(Flow, "prepare", spy)
    refused = cli("eval", "--resume", run_id, "--no-progress-bar", "--max-cost", "7")
    assert refused.exit_code == 1 and not seen  # the store says them: listed, and trusted only when told
    assert ["  - option: --var: x=1", "  - option: --grader: echo", "  - option: --providers: echo"] \
        == refused.output.strip().splitlines()[-3:], refused.output
    resumed = cli("eval", "--resume", run_id, "--no-progress-bar", "--max-cost", "7", "--trust-stored-config")
    assert resumed.exit_code == 100, resumed.output
    ro = seen[0].run
    for f in dataclasses.fields(RunOptions):
        m = opts.meta(f)
        if m.resume == RESTORE or (m.resume == KEEP and f.name != "max_cost"):
            assert getattr(ro, f.name) == (m.from_record or (lambda v: v))(record[m.record]), f.name
        elif m.resume == REFUSE:
            assert getattr(ro, f.name) is None, f.name  # the stored run's selected tests stand instead
    assert ro.max_cost == 7


def test_resume_refuses_every_option_it_takes_from_the_stored_run(tmp_path, isolated_home, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = write(tmp_path / "c.yaml", CONFIG)
    assert cli("eval", "-c", cfg, "--no-progress-bar").exit_code == 0
    refused = [opts.meta(f).flag for f, _ in _fields() if opts.meta(f).resume in (REFUSE, RESTORE)]
    assert refused == ["-c", "--repeat", "--var", "--filter-pattern", "--filter-first-n", "--filter-sample",
                       "--description", "--filter-failing", "--assertions", "--model-outputs"]
    result = cli("eval", "--resume", "latest", "--repeat", "2", "--var", "a=b", "--description", "d")
    assert result.exit_code == 1
    assert ("--resume uses the stored run's config and options; drop --repeat, --var, --description"
            in " ".join(result.output.split()))


def test_a_record_the_previous_code_stored_is_read_back():
    """The options record as factcli wrote it before the options were typed (session._options_record
    of 2026-11): the same keys, so a run stored then resumes with its options."""
    old = {"repeat": 2, "concurrency": 3, "cache": False, "max_concurrency": 3, "delay_ms": None,
           "no_cache": True, "grader": "echo", "vars": {"x": "1"}, "max_cost": None, "providers": ["echo"],
           "filter_pattern": "w", "filter_first_n": None, "filter_sample": None, "filter_failing": None,
           "mode": "config", "outputs": ["/tmp/out.json"], "tests": [0, 2]}
    ro, taken = opts.resumed(old, RunOptions(max_concurrency=8))
    assert ro == RunOptions(max_concurrency=8, repeat=2, cache=False, vars={"x": "1"}, grader="echo",
                            providers=["echo"])
    assert taken == {"--var": {"x": "1"}, "--grader": "echo", "--providers": ["echo"]}


def test_an_env_path_list_loads_every_file_and_a_later_file_wins(tmp_path, isolated_home, monkeypatch):
    """commandLineOptions.envPath as a list (promptfoo's: later files override earlier ones); a
    variable already set wins over the files, as --env-file's does."""
    for name in ("FACTCLI_T_WORD", "FACTCLI_T_ONLY_A", "FACTCLI_T_SET"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)  # (and unset again after the test)
    monkeypatch.setenv("FACTCLI_T_SET", "env")
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "a.env", "FACTCLI_T_WORD=first\nFACTCLI_T_ONLY_A=a\nFACTCLI_T_SET=a\n")
    write(tmp_path / "b.env", "FACTCLI_T_WORD=second\n")
    cfg = write(tmp_path / "c.yaml", """
prompts: ["{{ env.FACTCLI_T_WORD }} {{ env.FACTCLI_T_ONLY_A }} {{ env.FACTCLI_T_SET }}"]
providers: [echo]
tests: [{assert: [{type: equals, value: "second a env"}]}]
commandLineOptions: {envPath: [a.env, b.env]}
""")
    result = cli("eval", "-c", cfg, "--no-progress-bar", "--no-write")
    assert result.exit_code == 0, result.output


def test_one_check_per_option_for_evaluate_and_command_line_options(tmp_path):
    """Issue 51 item 2: an option's type and range are its Option's (`value`), checked the same way for
    evaluate()'s keyword, a config's commandLineOptions (in `factcli eval` and in evaluate()) and the
    CLI's flag (its parser's bound is the Option's minimum)."""
    from typer.testing import CliRunner

    from factcli import evaluate
    from factcli.cli import app
    import yaml

    from factcli.errors import ConfigError, FactcliError

    cfg = {"prompts": ["Q: {{q}}"], "providers": ["echo"], "tests": [{"vars": {"q": "one"}}]}
    with pytest.raises(FactcliError) as exc:
        evaluate(cfg, filter_first_n=1.5, store=False)
    assert str(exc.value) == "evaluate(filter_first_n=1.5): expected a whole number of at least 0, got 1.5"
    with pytest.raises(FactcliError, match=r"^evaluate\(filterSample=-1\): expected a whole number of at least 0"):
        evaluate(cfg, filterSample=-1, store=False)
    with pytest.raises(FactcliError, match=r"^evaluate\(delay=-5\): expected a number of milliseconds \(0 or more\)"):
        evaluate(cfg, delay=-5, store=False)
    bad = {**cfg, "commandLineOptions": {"filterFirstN": 1.5}}
    with pytest.raises(ConfigError, match=r"commandLineOptions\.filterFirstN: expected a whole number of at "
                                          r"least 0, got 1\.5$"):
        evaluate(bad, store=False)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(bad))
    result = CliRunner().invoke(app, ["eval", "-c", str(path), "--no-write", "--no-progress-bar"])
    assert result.exit_code == 1
    assert result.output.strip() == (f"error: {path}: commandLineOptions.filterFirstN: expected a whole number of "
                                     "at least 0, got 1.5"), result.output
    assert "Traceback" not in result.output
    path.write_text(yaml.safe_dump({**cfg, "commandLineOptions": {"filterFirstN": "1", "repeat": "2"}}))
    run = CliRunner().invoke(app, ["eval", "-c", str(path), "--no-write", "--no-progress-bar"])
    assert run.exit_code == 0 and "2/2 rows" in run.output, run.output  # promptfoo reads "2" as 2
    assert opts.minimum("filter_first_n") == 0 and opts.minimum("max_concurrency") == 1
    flag = CliRunner().invoke(app, ["eval", "-c", str(path), "--no-write", "--filter-first-n", "-1"])
    assert flag.exit_code == 2 and "x>=0" in flag.output, flag.output
