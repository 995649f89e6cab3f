"""Extension hooks (`extensions:`): beforeAll, beforeEach, afterEach and afterAll in Python and in
JavaScript, called with promptfoo's arguments and order, what each may change, failures (the run stops
with one line naming the hook, finished rows are kept, --resume finishes it) and load-time checks.
Every model call goes to the fake OpenAI server, whose request log shows what the model received."""

import json
import shutil

import pytest
from conftest import TS_REFUSED, ts_refused, write
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()
needs_node = pytest.mark.skipif(shutil.which("node") is None,
                                reason="JavaScript hooks run in the Node.js worker: no `node` on PATH")

PROVIDER = '{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}'


def config(extensions: list[str], tests: str = "[{vars: {q: one}}, {vars: {q: two}}]", extra: str = "") -> str:
    return (f'prompts: ["Q={{{{q}}}}"]\nproviders: [{PROVIDER}]\nextensions: {json.dumps(extensions)}\n'
            f"tests: {tests}\n{extra}")


def run(*args):
    return runner.invoke(app, ["eval", "--no-progress-bar", "--no-table", "--no-cache", *map(str, args)])


def sent(server) -> list[str]:
    """The user message of every chat request the fake server received, in order."""
    return [r["json"]["messages"][-1]["content"] for r in server.requests if r["json"] and "messages" in r["json"]]


def log_of(path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


# ---------------------------------------------------------------- the hooks, in Python and JavaScript

PY_HOOKS = '''
import json, os
LOG = os.environ["HOOK_LOG"]

def log(*a):
    with open(LOG, "a") as f:
        f.write(json.dumps(a) + "\\n")

def beforeAll(context, extra):
    log("beforeAll", extra["hookName"], sorted(context["suite"]["defaultTest"]))
    suite = context["suite"]
    suite["tests"].append({"vars": {"q": "added"}})
    suite["defaultTest"]["assert"].append({"type": "icontains", "value": "echo"})
    suite["providers"] = []  # not taken: a hook changes no provider
    return context

def beforeEach(context, extra):
    log("beforeEach", context["test"]["vars"]["q"])
    context["test"]["vars"]["q"] += "-BE"
    return context

def afterEach(context, extra):
    r = context["result"]
    log("afterEach", r["vars"]["q"], r["success"], r["response"]["output"])
    return {"result": {"namedScores": {"hook": 0.5, "dropped": "text"}, "metadata": {"byHook": True},
                       "response": {"metadata": {"seen": 1}}, "success": False, "score": 0.1}}

def afterAll(context, extra):
    log("afterAll", sorted(context), len(context["results"]), context["evalId"] != "")

def legacy(hook, context):
    log("legacy", hook)
'''

JS_HOOKS = '''
const fs = require('fs');
const log = (...a) => fs.appendFileSync(require('path').join(__dirname, 'log.jsonl'), JSON.stringify(a) + '\\n');
module.exports = {
  beforeAll(context, extra) {
    log('beforeAll', extra.hookName, Object.keys(context.suite.defaultTest).sort(), arguments.length,
        typeof context.suite.providers[0].id);
    context.suite.tests.push({ vars: { q: 'added' } });            // in place, nothing returned
    context.suite.defaultTest.assert.push({ type: 'icontains', value: 'echo' });
  },
  beforeEach(context) {
    log('beforeEach', context.test.vars.q);
    return { test: { ...context.test, vars: { ...context.test.vars, q: context.test.vars.q + '-BE' } } };
  },
  afterEach(context) {
    const r = context.result;
    log('afterEach', r.vars.q, r.success, r.response.output);
    context.result.namedScores.hook = 0.5;                          // in place, as promptfoo reads back
    return { result: { metadata: { byHook: true }, response: { metadata: { seen: 1 } }, success: false } };
  },
  afterAll(context) {
    log('afterAll', Object.keys(context).sort(), context.results.length, context.evalId !== '');
  },
  legacy(hook, context) { log('legacy', hook); },
};
'''

ALL = ["beforeAll", "beforeEach", "afterEach", "afterAll", "legacy"]


@pytest.mark.parametrize("lang", ["py", pytest.param("js", marks=needs_node)])
def test_every_hook_order_and_what_it_changes(tmp_path, fake_openai, monkeypatch, lang):
    write(tmp_path / f"hooks.{lang}", PY_HOOKS if lang == "py" else JS_HOOKS)
    monkeypatch.setenv("HOOK_LOG", str(tmp_path / "log.jsonl"))
    cfg = write(tmp_path / "c.yaml", config([f"file://hooks.{lang}:{fn}" for fn in ALL]))
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-j", 1, "-o", out)
    assert result.exit_code == 0, result.output
    # beforeAll added a test, beforeEach changed every row's vars before the prompt was rendered
    assert sent(fake_openai) == ["Q=one-BE", "Q=two-BE", "Q=added-BE"]
    log = log_of(tmp_path / "log.jsonl")
    calls = [entry[0] if entry[0] != "legacy" else f"legacy({entry[1]})" for entry in log]
    row = ["beforeEach", "legacy(beforeEach)", "afterEach", "legacy(afterEach)"]
    assert calls == ["beforeAll", "legacy(beforeAll)", *row * 3, "afterAll", "legacy(afterAll)"]
    before_all = log[0]
    assert before_all[1] == "beforeAll" and "assert" in before_all[2]  # defaultTest always has assert
    if lang == "js":  # a third argument (`process`), providers whose id is a method, as in promptfoo
        assert before_all[3:] == [3, "function"]
    assert [e[1] for e in log if e[0] == "beforeEach"] == ["one", "two", "added"]
    assert [e[1:] for e in log if e[0] == "afterEach"] == [
        ["one-BE", True, "Echo: Q=one-BE"], ["two-BE", True, "Echo: Q=two-BE"], ["added-BE", True, "Echo: Q=added-BE"]]
    assert [e for e in log if e[0] == "afterAll"] == [
        ["afterAll", ["config", "evalId", "prompts", "results", "suite"], 3, True]]
    doc = json.loads(out.read_text())
    rows = doc["results"]["results"]
    assert [r["vars"]["q"] for r in rows] == ["one-BE", "two-BE", "added-BE"]
    assert [r["testCase"]["vars"]["q"] for r in rows] == ["one-BE", "two-BE", "added-BE"]
    for r in rows:  # afterEach: namedScores (numbers only), metadata, response.metadata; nothing else
        assert r["success"] is True and r["score"] == 1
        assert r["namedScores"] == {"hook": 0.5}
        assert r["metadata"]["byHook"] is True and r["response"]["metadata"]["seen"] == 1
        assert [c["assertion"]["type"] for c in r["gradingResult"]["componentResults"]] == ["icontains"]
    metrics = doc["results"]["prompts"][0]["metrics"]
    assert metrics["namedScores"] == {"hook": 1.5} and metrics["namedScoresCount"] == {"hook": 3}


# ---------------------------------------------------------------- failures

# which hook fails is read from fail.txt next to the hooks (the Node worker outlives a test's environment)
FAILING = {
    "py": '''
import pathlib
def hook(hook_name, context):
    if hook_name != (pathlib.Path(__file__).parent / "fail.txt").read_text():
        return None
    if hook_name in ("beforeEach", "afterEach") and context["test"]["vars"]["q"] != "two":
        return None
    raise ValueError("boom in " + hook_name)
''',
    "js": '''
const fs = require('fs');
const path = require('path');
module.exports.hook = function (hookName, context) {
  if (hookName !== fs.readFileSync(path.join(__dirname, 'fail.txt'), 'utf8')) return;
  if ((hookName === 'beforeEach' || hookName === 'afterEach') && context.test.vars.q !== 'two') return;
  throw new TypeError('boom in ' + hookName);
};
''',
}


@pytest.mark.parametrize("lang", ["py", pytest.param("js", marks=needs_node)])
def test_failing_before_all_stops_before_any_call(tmp_path, fake_openai, monkeypatch, lang):
    write(tmp_path / f"h.{lang}", FAILING[lang])
    write(tmp_path / "fail.txt", "beforeAll")
    cfg = write(tmp_path / "c.yaml", config([f"file://h.{lang}:hook"]))
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-o", out)
    assert result.exit_code == 1, result.output
    error = "ValueError: boom in beforeAll (h.py:8)" if lang == "py" else "TypeError: boom in beforeAll (h.js:7)"
    assert f"error: extensions[0] h.{lang}:hook (beforeAll) raised {error}" in result.output
    assert sent(fake_openai) == [] and not out.exists()
    assert runner.invoke(app, ["list", "--json"]).output.strip() in ("[]", "")  # nothing stored


@pytest.mark.parametrize("hook", ["beforeEach", "afterEach"])
@pytest.mark.parametrize("lang", ["py", pytest.param("js", marks=needs_node)])
def test_failing_row_hook_keeps_finished_rows_and_resumes(tmp_path, fake_openai, monkeypatch, lang, hook):
    write(tmp_path / f"h.{lang}", FAILING[lang])
    write(tmp_path / "fail.txt", hook)
    cfg = write(tmp_path / "c.yaml", config([f"file://h.{lang}:hook"],
                                            tests="[{vars: {q: one}}, {vars: {q: two}}, {vars: {q: three}}]"))
    result = run("-c", cfg, "-j", 1)
    assert result.exit_code == 1, result.output
    name = "ValueError" if lang == "py" else "TypeError"
    assert f"error: extensions[0] h.{lang}:hook ({hook}) raised {name}: boom in {hook}" in result.output
    # beforeEach fails before the second call; afterEach after it, and that row is not kept
    assert sent(fake_openai) == (["Q=one"] if hook == "beforeEach" else ["Q=one", "Q=two"])
    listed = json.loads(runner.invoke(app, ["list", "--json"]).output)
    assert listed[0]["status"] == "aborted" and listed[0]["rows"] == 1
    fake_openai.reset()
    write(tmp_path / "fail.txt", "none")
    resumed = run("--resume", "latest")
    assert resumed.exit_code == 0, resumed.output
    assert sent(fake_openai) == ["Q=two", "Q=three"]  # the finished row is not asked again
    assert json.loads(runner.invoke(app, ["list", "--json"]).output)[0]["status"] == "complete"


@pytest.mark.parametrize("lang", ["py", pytest.param("js", marks=needs_node)])
def test_failing_after_all_keeps_every_row_and_the_output_file(tmp_path, fake_openai, monkeypatch, lang):
    write(tmp_path / f"h.{lang}", FAILING[lang])
    write(tmp_path / "fail.txt", "afterAll")
    cfg = write(tmp_path / "c.yaml", config([f"file://h.{lang}:hook"]))
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-o", out)
    assert result.exit_code == 1, result.output
    assert "(afterAll) raised" in result.output
    assert len(json.loads(out.read_text())["results"]["results"]) == 2  # promptfoo writes no file here
    fake_openai.reset()
    write(tmp_path / "fail.txt", "none")
    resumed = run("--resume", "latest", "-o", out)  # afterAll again, no model call (-o again: run/recording/trust.py)
    assert resumed.exit_code == 0, resumed.output
    assert sent(fake_openai) == []


def test_wrong_returns_stop_the_run_with_a_clear_line(tmp_path, fake_openai):
    write(tmp_path / "h.py", '''
def no_suite(hook, context):
    return {"nosuite": 1} if hook == "beforeAll" else None

def bad_test(hook, context):
    if hook == "beforeAll":
        context["suite"]["tests"].append({"vars": {"q": "x"}, "assert": [{"type": "no-such-type"}]})
        return context

def beforeEach(context, extra):
    return {"test": {**context["test"], "assert": [{"type": "equals"}]}}
''')
    for fn, message in [
        ("no_suite", "extensions[0] h.py:no_suite (beforeAll) returned no suite: return {suite: ...}"),
        ("bad_test", ("extensions[0] h.py:bad_test (beforeAll) returned suite: tests[2].assert[0].type: unknown "
                     "assertion type 'no-such-type'")),
        ("beforeEach", "extensions[0] h.py:beforeEach (beforeEach) returned test: tests[0].assert[0]"),
    ]:
        result = run("-c", write(tmp_path / "c.yaml", config([f"file://h.py:{fn}"])))
        assert result.exit_code == 1, result.output
        assert message in result.output
    assert sent(fake_openai) == []


# ---------------------------------------------------------------- what a return may change, and not


def test_before_all_suite_without_tests_keeps_them_and_prompts_can_be_added(tmp_path, fake_openai):
    write(tmp_path / "h.py", '''
def beforeAll(context, extra):
    suite = context["suite"]
    return {"suite": {"prompts": suite["prompts"] + [{"raw": "EXTRA {{q}}", "label": "extra"}],
                      "providers": [], "description": "changed"}}
''')
    out = tmp_path / "r.json"
    result = run("-c", write(tmp_path / "c.yaml", config(["file://h.py:beforeAll"])), "-j", 1, "-o", out)
    assert result.exit_code == 0, result.output
    # promptfoo runs one empty test when a returned suite has no `tests`; factcli keeps the tests
    assert sent(fake_openai) == ["Q=one", "EXTRA one", "Q=two", "EXTRA two"]
    doc = json.loads(out.read_text())
    assert [p["label"] for p in doc["results"]["prompts"]] == ["Q={{q}}", "extra"]


def test_after_each_on_an_error_row_adds_metadata_but_no_score(tmp_path, fake_openai, monkeypatch):
    write(tmp_path / "h.py", '''
def afterEach(context, extra):
    return {"result": {"namedScores": {"hook": 1}, "metadata": {"error": context["result"].get("error")}}}
''')
    fake_openai.enqueue_fault(status=400)
    out = tmp_path / "r.json"
    result = run("-c", write(tmp_path / "c.yaml", config(["file://h.py:afterEach"], tests="[{vars: {q: one}}]")),
                 "-o", out)
    row = json.loads(out.read_text())["results"]["results"][0]
    assert result.exit_code == 100 and row["failureReason"] == 2
    assert row["metadata"]["error"] and row["namedScores"] == {}


def test_bare_python_file_calls_get_transform_for_every_hook(tmp_path, fake_openai, monkeypatch):
    write(tmp_path / "h.py", '''
import os
def get_transform(hook, context):
    with open(os.environ["HOOK_LOG"], "a") as f:
        f.write(hook + "\\n")
''')
    monkeypatch.setenv("HOOK_LOG", str(tmp_path / "log"))
    assert run("-c", write(tmp_path / "c.yaml", config(["file://h.py"], tests="[{vars: {q: one}}]"))).exit_code == 0
    assert (tmp_path / "log").read_text().split() == ["beforeAll", "beforeEach", "afterEach", "afterAll"]


def test_dry_run_calls_no_hook(tmp_path, fake_openai, monkeypatch):
    write(tmp_path / "h.py", FAILING["py"])
    write(tmp_path / "fail.txt", "beforeAll")
    result = run("-c", write(tmp_path / "c.yaml", config(["file://h.py:hook"])), "--dry-run")
    assert result.exit_code == 0, result.output
    assert "Extension hooks are not called in a dry run" in result.output


# ---------------------------------------------------------------- checked when the config loads


@pytest.mark.parametrize("entry, message", [
    ("file://missing.py:fn", "extensions[0]: extension file not found:"),
    ("file://h.py:beforeal", "extensions[0]: h.py has no function 'beforeal' (did you mean 'beforeAll'?)"),
    ("file://h.py", "extensions[0]: h.py has no function 'get_transform'"),
    ("h.py:beforeAll", ("extensions[0]: an extension is a file reference, file://hooks.py:function or "
                       "file://hooks.js:function; got 'h.py:beforeAll' (did you mean 'file://h.py:beforeAll'?)")),
    ("file://broken.py:x", "extensions[0]: broken.py does not import: ImportError: nope"),
    pytest.param("file://h.ts:beforeAll", f"extensions[0]: h.ts {TS_REFUSED}", marks=ts_refused),
    ("file://h.txt:x", "extensions[0]: an extension must be a .py or .js file"),
    pytest.param("file://h.js:beforeAll", 'extensions[0]: h.js does not export a function named "beforeAll"',
                 marks=needs_node),
])
def test_load_errors_name_the_entry(tmp_path, fake_openai, entry, message):
    write(tmp_path / "h.py", "def beforeAll(context, extra):\n    pass\n")
    write(tmp_path / "broken.py", "raise ImportError('nope')\n")
    write(tmp_path / "h.js", "module.exports = {other() {}};\n")
    write(tmp_path / "h.ts", "export function beforeAll() {}\n")
    result = run("-c", write(tmp_path / "c.yaml", config([entry])))
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output
    assert sent(fake_openai) == []


def test_a_hook_name_in_another_case_is_a_warning(tmp_path, fake_openai):
    write(tmp_path / "h.py", "def before_all(hook, context):\n    pass\n")
    result = run("-c", write(tmp_path / "c.yaml", config(["file://h.py:before_all"])))
    assert result.exit_code == 0, result.output
    assert "'before_all' is not a hook name" in result.output
