"""A stored run is data until its user says otherwise (issue 48, item 1): `--resume` rebuilds a run
from what the store says only when it is the user's own config file, byte for byte, or after
`--trust-stored-config`. Each bypass found by a hostile pass is planted here as an attacker with write
access to the store's SQLite file would plant it, then refused (exit 1, the reason listed, 0 requests,
nothing run or written) and run once trusted. The model is a real OpenAI-compatible server on
127.0.0.1 (tests/fake_openai.py), reached by factcli's own client with the victim's key.

Last, the config-key table (config/keys.py): every key the loader reads is declared there."""

import ast
import json
import sqlite3
from pathlib import Path

import pytest
from aiohttp import web
from conftest import write
from fake_openai import FakeOpenAI
from local_server import LocalServer
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()
KEY = "sk-victim-key-1234567890"
N = 4


def cli(*args):
    return runner.invoke(app, [*map(str, args)])


def _tests(extra: str = "") -> str:
    """The victim's four tests; `extra` is YAML for test 3's assert list (what an attacker adds)."""
    lines = "".join(f"  - vars: {{w: w{i}}}\n" for i in range(N - 1))
    return lines + f"  - vars: {{w: w{N - 1}}}\n" + (f"    assert: [{extra}]\n" if extra else "")


CONFIG = "prompts: ['Say {{w}}']\nproviders: ['openai:chat:m1']\ntests:\n" + _tests()


@pytest.fixture
def victim(fake_openai, tmp_path, monkeypatch):
    """The victim's machine: their key, their model server, their config; one run stored and then
    interrupted with test 3 still to run. Returns (db, run id, config path)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    monkeypatch.chdir(tmp_path)
    cfg = write(tmp_path / "c.yaml", CONFIG)
    first = cli("eval", "-c", cfg, "--no-progress-bar", "--no-table", "--no-cache")
    assert first.exit_code == 0, first.output
    db = Path(tmp_path / "factcli-home" / "factcli.db")
    with sqlite3.connect(db) as conn:
        run_id = conn.execute("SELECT id FROM runs").fetchone()[0]
        conn.execute("UPDATE runs SET status = 'interrupted', finished_at = NULL")
        conn.execute("DELETE FROM results WHERE test_idx = ?", (N - 1,))
    fake_openai.reset()
    return db, run_id, cfg


def plant(db, *, config=None, files=None, options=None) -> None:
    """What an attacker who can write the store does: change the run's stored config (a function of
    it), its config-file list, its options record."""
    with sqlite3.connect(db) as conn:
        cfg, opts = conn.execute("SELECT config_json, options_json FROM runs").fetchone()
        if config is not None:
            conn.execute("UPDATE runs SET config_json = ?", (json.dumps(config(json.loads(cfg))),))
        if files is not None:
            conn.execute("UPDATE runs SET config_files_json = ?", (json.dumps([str(f) for f in files]),))
        if options is not None:
            conn.execute("UPDATE runs SET options_json = ?", (json.dumps(options(json.loads(opts))),))


def gone(db) -> None:
    """The run resumed on a machine without its config file: the stored config is what would run."""
    plant(db, files=["/nowhere/c.yaml"])


def with_assertion(assertion: dict):
    def change(cfg):
        cfg["tests"][N - 1]["assert"] = [assertion]
        return cfg
    return change


def with_options(**options):
    def change(cfg):
        cfg["tests"][N - 1]["options"] = options
        return cfg
    return change


def refused(run_id, server, *reasons, args=()):
    """--resume without the flag: exit 1, the reasons listed, nothing asked of the model."""
    result = cli("eval", "--resume", run_id, "--no-progress-bar", "--no-table", *args)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].startswith(f"error: run {run_id} would be rebuilt from what the store says, not from your files")
    assert "--trust-stored-config" in lines[0]
    for reason in reasons:
        assert f"  - {reason}" in lines, (reason, result.output)
    assert server.request_count == 0
    return result


def trusted(run_id, server, *args, flag="--trust-stored-config"):
    """--resume with the flag: the list printed, then the run."""
    result = cli("eval", "--resume", run_id, "--no-progress-bar", "--no-table", flag, *args)
    assert result.exit_code in (0, 100), result.output  # 100: a planted assertion that fails
    assert f"{flag.replace('-code', '-config')}: run {run_id} takes from the store" in result.output
    assert server.request_count >= 1
    return result


# ---------------------------------------------------------------- code whose text ends in .py / .js

PY = "__import__('os').system('touch\\x20PWNED')and(1).py"  # the scan took it for a file name


def test_inline_python_ending_in_py_is_code(victim, fake_openai, tmp_path):
    db, run_id, _ = victim
    gone(db)
    plant(db, config=with_assertion({"type": "python", "value": PY}))
    refused(run_id, fake_openai, f"runs code: tests[3].assert[0].value: inline python assertion: {PY}")
    assert not (tmp_path / "PWNED").exists()
    trusted(run_id, fake_openai)
    assert (tmp_path / "PWNED").exists()


# the Node worker is shared by the tests of this process: a marker by its absolute path
JS_ASSERT = "process.mainModule.require('fs').writeFileSync('{marker}','x')||!{{}}.js"


def test_inline_javascript_ending_in_js_is_code(victim, fake_openai, tmp_path):
    db, run_id, _ = victim
    gone(db)
    code = JS_ASSERT.format(marker=tmp_path / "PWNED_J")
    plant(db, config=with_assertion({"type": "javascript", "value": code}))
    refused(run_id, fake_openai, f"runs code: tests[3].assert[0].value: inline javascript assertion: {code}")
    assert not (tmp_path / "PWNED_J").exists()
    trusted(run_id, fake_openai)
    assert (tmp_path / "PWNED_J").exists()


@pytest.mark.parametrize("key, code", [
    ("transform", "[process.mainModule.require('fs').writeFileSync('{marker}','x'),output][1]+[].js"),
    ("postprocess", "[process.mainModule.require('fs').writeFileSync('{marker}','x'),output][1]+[].js"),
    ("transformVars",
     "[Object.assign(vars,{{z:process.mainModule.require('fs').writeFileSync('{marker}','x')}})][0]||[].js"),
])
def test_transforms_ending_in_js_are_code(victim, fake_openai, tmp_path, key, code):
    """transform, transformVars and options.postprocess (which the pattern list did not have)."""
    db, run_id, _ = victim
    code = code.format(marker=tmp_path / "PWNED_T")
    gone(db)
    plant(db, config=with_options(**{key: code}))
    refused(run_id, fake_openai, f"runs code: tests[3].options.{key}: inline {key}: {code}")
    assert not (tmp_path / "PWNED_T").exists()
    trusted(run_id, fake_openai)
    assert (tmp_path / "PWNED_T").exists()


# ---------------------------------------------------------------- files and URLs that hold code

def _evil_tests(marker: str) -> str:
    return "".join(f"- vars: {{w: w{i}}}\n" for i in range(N - 1)) + (
        f"- vars: {{w: w{N - 1}}}\n  assert: [{{type: python, value: \"__import__('pathlib').Path('{marker}')"
        ".write_text('ran') > 0\"}]\n")


def test_a_tests_file_holding_code_is_listed_as_a_read(victim, fake_openai, tmp_path):
    db, run_id, _ = victim
    evil = write(tmp_path / "shared" / "tests.yaml", _evil_tests("PWNED_F"))
    gone(db)
    plant(db, config=lambda cfg: {**cfg, "tests": f"file://{evil}"})
    refused(run_id, fake_openai, f"reads: tests: file://{evil} (more config: it may hold code)")
    assert not (tmp_path / "PWNED_F").exists()
    trusted(run_id, fake_openai)
    assert (tmp_path / "PWNED_F").read_text() == "ran"


class TestsServer(LocalServer):
    __test__ = False
    """A web server holding a tests file, counting who fetches it."""

    name = "TestsServer"

    def __init__(self, text: str):
        self.text, self.hits = text, 0

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/tests.yaml", self.serve)

    async def serve(self, request):
        self.hits += 1
        return web.Response(text=self.text, content_type="application/yaml")


def test_a_tests_url_holding_code_is_listed_as_a_read(victim, fake_openai, tmp_path):
    db, run_id, _ = victim
    with TestsServer(_evil_tests("PWNED_U")) as server:
        url = f"{server.url}/tests.yaml"
        gone(db)
        plant(db, config=lambda cfg: {**cfg, "tests": url})
        refused(run_id, fake_openai, f"reads: tests: {url} (more config: it may hold code)")
        assert server.hits == 0 and not (tmp_path / "PWNED_U").exists()
        trusted(run_id, fake_openai)
        assert server.hits >= 1
    assert (tmp_path / "PWNED_U").read_text() == "ran"


def test_a_planted_config_file_list_is_not_the_users_config(victim, fake_openai, tmp_path):
    """The stored list points at a YAML that exists (with code in it); the stored config is the
    victim's: the files do not give it, so they are what the store chose."""
    db, run_id, _ = victim
    other = write(tmp_path / "elsewhere" / "other.yaml", "prompts: ['Say {{w}}']\nproviders: ['openai:chat:m1']\n"
                  "tests:\n" + "".join("  " + line + "\n" for line in _evil_tests("PWNED_C").splitlines()))
    plant(db, files=[other])
    result = refused(run_id, fake_openai, f"reads: config file: {other} (named by the store: it may hold code)",
                     "runs code: tests[3].assert[0].value: inline python assertion: "
                     "__import__('pathlib').Path('PWNED_C').write_text('ran') > 0")
    assert "the config files it names are not the config it stored" in result.output
    assert not (tmp_path / "PWNED_C").exists()
    trusted(run_id, fake_openai)
    assert (tmp_path / "PWNED_C").read_text() == "ran"


def test_a_model_outputs_run_names_its_files_from_the_store(tmp_path, monkeypatch):
    """--assertions and --model-outputs are re-read from the paths the store names: an attacker points
    them at an assertions file with code; they are listed and read only once trusted."""
    monkeypatch.chdir(tmp_path)
    asserts = write(tmp_path / "asserts.yaml", "- type: icontains\n  value: paris\n")
    outputs = write(tmp_path / "outputs.json", json.dumps(["Paris", "Paris again"]))
    first = cli("eval", "--no-progress-bar", "--no-table", "--assertions", asserts, "--model-outputs", outputs)
    assert first.exit_code == 0, first.output
    evil = write(tmp_path / "shared" / "asserts.yaml",
                 "- type: python\n  value: \"__import__('pathlib').Path('PWNED_M').write_text('ran') > 0\"\n")
    db = tmp_path / "factcli-home" / "factcli.db"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET status = 'interrupted', finished_at = NULL")
        conn.execute("DELETE FROM results WHERE test_idx = 1")
        run_id = conn.execute("SELECT id FROM runs").fetchone()[0]
    plant(db, options=lambda opts: {**opts, "assertions": str(evil)})
    result = cli("eval", "--resume", run_id, "--no-progress-bar", "--no-table")
    assert result.exit_code == 1 and "the files it scored are named by the store" in result.output, result.output
    assert f"  - reads: --assertions/--model-outputs: {evil} (named by the store: it may hold code)" in result.output
    assert not (tmp_path / "PWNED_M").exists()
    result = cli("eval", "--resume", run_id, "--no-progress-bar", "--no-table", "--trust-stored-config")
    assert result.exit_code in (0, 100), result.output
    assert (tmp_path / "PWNED_M").read_text() == "ran"


def test_the_list_never_shows_a_secret(victim, fake_openai, tmp_path):
    """The list quotes code and URLs: a secret in them (the environment's, a config's literal key)
    is shown as the store would keep it."""
    db, run_id, _ = victim
    other = write(tmp_path / "elsewhere" / "other.yaml", "prompts: ['Say {{w}}']\n"
                  "providers: [{id: 'openai:chat:m1', config: {apiKey: 'sk-literal-0987654321abcdef'}}]\n"
                  "tests:\n  - vars: {w: w0}\n    assert: [{type: python, value: \"'" + KEY
                  + "' != 'sk-literal-0987654321abcdef'\"}]\n")
    plant(db, files=[other])
    result = refused(run_id, fake_openai)
    assert KEY not in result.output and "sk-literal-0987654321abcdef" not in result.output
    assert "inline python assertion: '${OPENAI_API_KEY}' != '[redacted]'" in result.output, result.output


# ---------------------------------------------------------------- paths it writes

def test_a_stored_output_path_is_not_written_without_trust(victim, fake_openai, tmp_path):
    db, run_id, _ = victim
    target = write(tmp_path / "project" / "requirements.txt", "keep me\n")
    plant(db, options=lambda opts: {**opts, "outputs": [str(target)]})
    # the resume goes on (nothing it runs comes from the store) but never writes where the store says
    result = cli("eval", "--resume", run_id, "--no-progress-bar", "--no-table")
    assert result.exit_code == 0, result.output
    assert (f"not writing the -o files the store names ({target}): give -o again to write them, or "
            "--trust-stored-config") in " ".join(result.output.split())
    assert target.read_text() == "keep me\n"


def test_a_stored_output_path_is_written_once_trusted(victim, fake_openai, tmp_path):
    db, run_id, _ = victim
    target = write(tmp_path / "project" / "requirements.txt", "keep me\n")
    plant(db, options=lambda opts: {**opts, "outputs": [str(target)]})
    result = trusted(run_id, fake_openai)
    assert f"  - writes: -o: {target}" in result.output.splitlines()
    assert target.read_text() != "keep me\n"  # the user said so


def test_an_output_path_given_again_is_the_users_own(victim, fake_openai, tmp_path):
    db, run_id, _ = victim
    out = tmp_path / "r.json"
    plant(db, options=lambda opts: {**opts, "outputs": [str(out)]})
    result = cli("eval", "--resume", run_id, "--no-progress-bar", "--no-table", "-o", out)
    assert result.exit_code == 0, result.output
    assert len(json.loads(out.read_text())["results"]["results"]) == N


# ---------------------------------------------------------------- credentials and env vars

def test_a_stored_endpoint_never_receives_the_key(victim, fake_openai, tmp_path):
    db, run_id, _ = victim
    with FakeOpenAI() as capture:
        gone(db)
        plant(db, config=lambda cfg: {**cfg, "providers": [{"id": "openai:chat:m1",
                                                             "config": {"apiBaseUrl": capture.url}}]})
        refused(run_id, fake_openai, f"sends your credential to: providers[0].config.apiBaseUrl: {capture.url}")
        assert capture.request_count == 0
        assert not any("Authorization" in r["headers"] or "authorization" in r["headers"] for r in capture.requests)
        trusted(run_id, capture)  # trusted: the user chose to send their key there


def test_a_stored_grader_endpoint_is_listed(victim, fake_openai):
    db, run_id, _ = victim
    gone(db)
    plant(db, config=with_assertion({"type": "llm-rubric", "value": "fine",
                                     "provider": {"id": "openai:chat:judge",
                                                  "config": {"apiBaseUrl": "http://127.0.0.1:9/v1"}}}))
    refused(run_id, fake_openai,
            "sends your credential to: tests[3].assert[0].provider.config.apiBaseUrl: http://127.0.0.1:9/v1")


def test_env_vars_a_stored_rubric_reads_are_listed(victim, fake_openai, monkeypatch):
    db, run_id, _ = victim
    monkeypatch.setenv("PGPASSWORD", "pg-secret-pw")
    gone(db)
    plant(db, config=with_assertion({"type": "llm-rubric",
                                     "value": "KEY={{ env.OPENAI_API_KEY }} PG={{ env.PGPASSWORD }}"}))
    refused(run_id, fake_openai, "env: tests[3].assert[0].value: reads OPENAI_API_KEY",
            "env: tests[3].assert[0].value: reads PGPASSWORD")
    fake_openai.add_rule("KEY=", '{"pass": true, "score": 1, "reason": "fine"}')
    trusted(run_id, fake_openai)
    # what trusting it meant: the grading prompt carried both
    assert any(KEY in json.dumps(r["json"]) and "pg-secret-pw" in json.dumps(r["json"]) for r in fake_openai.requests)


def test_stored_options_need_trust(victim, fake_openai, tmp_path):
    """--var, --providers and --grader of the first run are stored with it and taken back: the store
    says them, even where the config files are the user's own."""
    db, run_id, _ = victim
    plant(db, options=lambda opts: {**opts, "vars": {"extra": "{{ env.OPENAI_API_KEY }}"}})
    refused(run_id, fake_openai, "option: --var: extra={{ env.OPENAI_API_KEY }}",
            "env: --var.extra: reads OPENAI_API_KEY")
    plant(db, options=lambda opts: {**opts, "vars": {}, "providers": ["openai:chat:m1"],
                                    "grader": "openai:chat:judge"})
    refused(run_id, fake_openai, "option: --providers: openai:chat:m1", "option: --grader: openai:chat:judge")
    trusted(run_id, fake_openai)


# ---------------------------------------------------------------- the user's own config

def test_a_config_equal_to_the_local_file_resumes_without_the_flag(fake_openai, tmp_path, monkeypatch):
    """Code in the user's own config file is the user's, as for any eval: resumed as it is."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    monkeypatch.chdir(tmp_path)
    code = "{type: python, value: \"__import__('pathlib').Path('MINE').write_text('ran') > 0\"}"
    cfg = write(tmp_path / "c.yaml", CONFIG.replace("tests:\n" + _tests(), "tests:\n" + _tests(code)))
    assert cli("eval", "-c", cfg, "--no-progress-bar", "--no-table").exit_code == 0
    (tmp_path / "MINE").unlink()
    with sqlite3.connect(tmp_path / "factcli-home" / "factcli.db") as conn:
        run_id = conn.execute("SELECT id FROM runs").fetchone()[0]
        conn.execute("UPDATE runs SET status = 'interrupted', finished_at = NULL")
        conn.execute("DELETE FROM results WHERE test_idx = ?", (N - 1,))
    fake_openai.reset()
    result = cli("eval", "--resume", run_id, "--no-progress-bar", "--no-table", "--no-cache")
    assert result.exit_code == 0, result.output
    assert "trust" not in result.output and (tmp_path / "MINE").read_text() == "ran"
    assert fake_openai.request_count == 1


def test_the_older_flag_still_trusts(victim, fake_openai, tmp_path):
    db, run_id, _ = victim
    gone(db)
    plant(db, config=with_assertion({"type": "python", "value": PY}))
    trusted(run_id, fake_openai, flag="--trust-stored-code")
    assert (tmp_path / "PWNED").exists()


# ---------------------------------------------------------------- the config-key table

CONFIG_PACKAGE = Path(__file__).resolve().parent.parent / "factcli" / "config"
# String keys the config package reads that are not config keys, by module: what each is.
NOT_CONFIG = {
    "benchmarks.py": {"split", "columns", "perDataset", "datasets", "seed", "HTTP 401", "HTTP 403",
                      "dataset"},  # a calibrate --benchmark selection as stored, a benchmark's rows, HTTP errors
    "csv_text.py": {"FACTCLI_CSV_DELIMITER", "PROMPTFOO_CSV_DELIMITER", "FACTCLI_CSV_STRICT",
                    "PROMPTFOO_CSV_STRICT"},  # env settings
    "expected_cells.py": {"javascript:", ".py:", "fn:", "eval:"},  # an __expected cell's text
    "extensions.py": {":", "providerPromptMap", "redteam", "derived_metrics", "default_test"},  # a hook's suite
    "filters.py": {"undefined"},  # a JavaScript filter's reply
    "gates.py": {"pct", "op", "judged", "passed", "source", "minJudged", "column", "note"},  # a parsed --gate,
    # and a stored gate verdict (GateResult.to_json: runs.gates_json)
    "judge_calibration.py": {"confusion", "calibration", "calibrationLabel", "assertion", "graders"},  # its report
    "labels.py": {"context", "graders", "labels", "reference", "context_var",
                  "eligibility"},  # calibrate's label files and its benchmark defaults
    "loader.py": {"prompt", "promptfooconfig.yaml", "promptfooconfig.yml", "promptfooconfig.json"},  # a var, file names
    "model_outputs.py": {"system"},  # a --model-outputs entry
    "plan.py": {"context"},  # a row's vars
    "prompts.py": {"role", "content", "\n", "<<", "prompt"},  # chat messages, template text, a prompt CSV's column
    "remote.py": {"subset", "limit", "offset", "length", "@", "split", "rows", "num_rows_total", "error", "row",
                  "FACTCLI_HF_DATASETS_SERVER", "truncated_cells", "cut"},  # a Hugging Face dataset URL and its server's replies
    "testsets.py": {"\n", ".py:", "javascript:", "fn:", "eval:", "FACTCLI_CSV_DELIMITER", "PROMPTFOO_CSV_DELIMITER",
                    "FACTCLI_CSV_STRICT", "PROMPTFOO_CSV_STRICT",
                    "field limit"},  # CSV text, env settings and the csv module's error text
    "var_check.py": {"content"},  # chat messages
    "keys.py": set(), "stored_trust.py": {"type", "*"},
}


def key_reads(source: str) -> dict[str, int]:
    """Every string key `source` reads from a mapping: `x.get("k")`, `x.pop("k")`, `x["k"]`, `"k" in x`,
    `for k in ("a", "b")` (a loop over keys) -> its first line."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(source)):
        texts = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args \
                and node.func.attr in ("get", "pop", "setdefault"):
            texts = [node.args[0]]
        elif isinstance(node, ast.Subscript):
            texts = [node.slice]
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            texts = [node.left]
        elif isinstance(node, ast.For) and isinstance(node.iter, (ast.Tuple, ast.List, ast.Set)):
            texts = node.iter.elts
        for t in texts:
            if isinstance(t, ast.Constant) and isinstance(t.value, str):
                found.setdefault(t.value, node.lineno)
    return found


def undeclared(name: str, source: str) -> list[str]:
    from factcli.config.keys import every_key

    known = every_key() | NOT_CONFIG.get(name, set())
    return [f"{name}:{line}: '{key}' is read but not in config/keys.py" for key, line in key_reads(source).items()
            if key not in known]


def test_every_key_the_config_package_reads_is_in_the_table():
    problems = [p for f in sorted(CONFIG_PACKAGE.glob("*.py")) for p in undeclared(f.name, f.read_text())]
    assert problems == []


PROVIDERS_PACKAGE = CONFIG_PACKAGE.parent / "providers"


def config_reads(source: str) -> dict[str, int]:
    """The string keys `source` reads from a provider's config (`config`, `self.config`, `x.config`)."""
    def is_config(e):
        return (isinstance(e, ast.Name) and e.id in ("config", "cfg")) or (
            isinstance(e, ast.Attribute) and e.attr == "config")

    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop") \
                and is_config(node.func.value) and node.args:
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and is_config(node.value):
            key = node.slice
        elif isinstance(node, ast.Compare) and any(is_config(c) for c in node.comparators):
            key = node.left
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.setdefault(key.value, node.lineno)
    return found


def test_every_provider_config_key_a_provider_reads_is_in_the_table():
    """A provider reading a new key of its config (an endpoint, a file) must declare it: the request
    parameters sent as they are (litellm_provider.PASSTHROUGH) are data."""
    from factcli.config.keys import names
    from factcli.providers.litellm_provider import PASSTHROUGH

    known = names("provider.config") | names("search") | PASSTHROUGH
    problems = [f"{f.relative_to(PROVIDERS_PACKAGE)}:{line}: '{key}'" for f in sorted(PROVIDERS_PACKAGE.rglob("*.py"))
                for key, line in config_reads(f.read_text()).items() if key not in known]
    assert problems == []
    assert config_reads("x = self.config.get('baseUrl')\n") == {"baseUrl": 1}  # what a new one looks like


def test_the_table_test_catches_a_new_key():
    """What a new key the loader reads looks like to the test: each spelling of a read is caught."""
    source = (CONFIG_PACKAGE / "loader.py").read_text()
    for read in ('cfg.get("preRun")', 'cfg["preRun"]', '"preRun" in cfg', 'cfg.pop("preRun")'):
        assert undeclared("loader.py", source + f"\nx = {read}\n") == [
            f"loader.py:{source.count(chr(10)) + 2}: 'preRun' is read but not in config/keys.py"], read
    assert undeclared("testcases.py", "for key in ('transform', 'onError'):\n    pass\n") == [
        "testcases.py:1: 'onError' is read but not in config/keys.py"]


def test_the_loaders_known_keys_are_the_tables():
    from factcli.config import cli_options, keys, loader, providers, testcases

    assert loader.TOP_KEYS == keys.names("top") and loader.EVAL_OPTION_KEYS == keys.names("evaluateOptions")
    assert testcases.TEST_KEYS == keys.names("test") and testcases.ASSERT_KEYS == keys.names("assert")
    assert testcases.OPTION_KEYS == keys.names("test.options")
    assert providers.PROVIDER_KEYS == keys.names("provider") and providers.KNOWN_CONFIG_KEYS == keys.names(
        "provider.config")
    assert set(cli_options.HONOURED) == keys.names("commandLineOptions")


def test_every_code_key_is_listed_as_code():
    """Each key of kind code, at its level, holding suffix-named inline code, is listed as code."""
    from factcli.config.keys import LEVELS, Kind
    from factcli.config.stored_trust import what_it_would_do

    paths = {"top": [], "provider": ["providers", 0], "test": ["tests", 0], "test.options": ["tests", 0, "options"],
             "assert": ["tests", 0, "assert", 0], "testGenerator": ["tests", 0],
             "derivedMetric": ["derivedMetrics", 0]}
    checked = 0
    for level, keys in LEVELS.items():
        for key, spec in keys.items():
            if spec.kind is not Kind.CODE:
                continue
            assert level in paths, f"{level}.{key}: add where the level sits in a config"
            node = {"type": "python"} if level == "assert" else {"id": "echo"} if level == "provider" else {}
            node[key] = "return 1//x.js" if level == "derivedMetric" else "x.py"
            cfg = node
            for step in reversed(paths[level]):
                cfg = [cfg] if isinstance(step, int) else {step: cfg}
            if spec.shape != "value":  # a list or map of them
                cfg = {key: {"f": "x.py"} if spec.shape == "map" else ["x.py"]}
            found = what_it_would_do(cfg)
            assert any(line.startswith("runs code:") for line in found), (level, key, found)
            checked += 1
    assert checked >= 10


def test_a_dry_run_lists_what_the_config_would_do(fake_openai, tmp_path, monkeypatch):
    """Preflight's --dry-run reads the same table: what a resume would ask trust for, the user sees first."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.chdir(tmp_path)
    cfg = write(tmp_path / "c.yaml", "prompts: ['Say {{w}}']\n"
                "providers: [{id: 'openai:chat:m1', config: {apiBaseUrl: '" + fake_openai.url + "'}}]\n"
                "outputPath: out.json\ntests:\n" + _tests("{type: python, value: 'output.py'}"))
    result = cli("eval", "-c", cfg, "--dry-run", "--no-progress-bar")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start = lines.index("Besides its calls, the config would (what a resume from the store would need trusted for):")
    assert lines[start + 1:start + 4] == [
        f"  - sends your credential to: providers[0].config.apiBaseUrl: {fake_openai.url}",
        "  - writes: outputPath: out.json",
        "  - runs code: tests[3].assert[0].value: inline python assertion: output.py"]
    assert fake_openai.request_count == 0
