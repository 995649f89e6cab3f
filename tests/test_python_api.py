"""The Python API (factcli/run/api.py, run/check.py, run/result.py): evaluate() from scripts and from
inside a running event loop, Python functions as providers, graders and assertions, dict and YAML
configs, the stored run seen by `factcli view`, and check() with deterministic, model-graded and
claim-level assertions."""

import asyncio
import json
import os
import threading

import pytest
from conftest import write
from test_factual_correctness import BAD, REFERENCE, scripted_judge
from typer.testing import CliRunner

import factcli
from factcli.cli import app


def shout(prompt, options, context):
    return prompt.upper()


async def reverse(prompt, options, context):
    await asyncio.sleep(0)
    return {"output": prompt[::-1], "tokenUsage": {"prompt": 2, "completion": 3}, "cost": 0.5}


def short(output, context):
    return len(output) < 12


async def has_vowel_score(output, context):
    await asyncio.sleep(0)
    return {"pass": any(c in output.lower() for c in "aeiou"), "score": 0.75, "reason": f"vars {context['vars']}"}


CONFIG = {
    "description": "functions",
    "prompts": ["Q: {{q}}"],
    "providers": [shout, {"id": reverse, "label": "backwards"}],
    "tests": [
        {"description": "short", "vars": {"q": "hi"}, "assert": [short, {"type": "python", "value": has_vowel_score}]},
        {"description": "long", "vars": {"q": "a rather long question"}, "assert": [short]},
    ],
}


def _check_functions_run(run):
    rows = {(r.step.test_idx, r.step.prompt_idx): r for r in run.rows}
    assert rows[0, 0].response.output == "Q: HI" and rows[0, 0].success
    assert rows[0, 1].response.output == "ih :Q" and rows[0, 1].response.cost == 0.5
    assert rows[0, 0].grading.component_results[1].score == 0.75
    assert "'q': 'hi'" in rows[0, 0].grading.component_results[1].reason  # the context reached the function
    assert not rows[1, 0].success and rows[1, 0].grading.reason == "Python function short returned false"
    assert (run.successes, run.failures, run.errors) == (2, 2, 0)


def test_functions_as_providers_and_assertions_sync_and_async():
    run = factcli.evaluate(CONFIG)
    _check_functions_run(run)
    assert [c["provider"] for c in run.column_summaries] == ["shout", "backwards"]
    summary = run.column_summaries[0]
    assert summary["pass"] == 1 and summary["passRate"] == 0.5 and len(summary["passRateCi95"]) == 2
    doc = run.to_promptfoo()
    assert doc["results"]["results"][0]["testCase"]["assert"][0] == {"type": "python-function", "value": "short"}
    assert doc["results"]["prompts"][1]["provider"] == "backwards"
    assert "<table" in run._repr_html_() and 'class="fc"' in run._repr_html_()
    assert "2 passed, 2 failed" in repr(run)


def test_evaluate_inside_a_running_event_loop():
    """A notebook cell runs inside an event loop: evaluate() runs the eval on a loop of its own."""
    seen = {}

    def where(prompt):
        seen["thread"] = threading.current_thread().name
        return prompt

    async def cell():
        asyncio.get_running_loop()  # we are inside one
        return factcli.evaluate(CONFIG), factcli.evaluate({"prompts": ["x"], "providers": [where], "tests": [{"vars": {}}]})

    run, second = asyncio.run(cell())
    _check_functions_run(run)
    assert second.successes == 1 and seen["thread"] != threading.main_thread().name


def test_evaluate_async_awaits_on_the_callers_loop():
    async def cell():
        return await factcli.evaluate_async(CONFIG, store=False)

    run = asyncio.run(cell())
    _check_functions_run(run)
    assert run.stored is False


def test_yaml_text_and_dict_configs_and_promptfoo_options(tmp_path):
    text = "prompts: ['say {{x}}']\nproviders: [echo]\ntests:\n  - vars: {x: 1}\n    assert: [{type: equals, value: say 1}]\n"
    assert factcli.evaluate(text).pass_rate == 1.0
    cfg = {"prompts": ["say {{x}}"], "providers": ["echo"], "tests": [{"vars": {"x": 1}}, {"vars": {"x": 2}}]}
    run = factcli.evaluate(cfg, {"maxConcurrency": 1, "repeat": 2})
    assert run.concurrency == 1 and len(run.rows) == 4
    out = tmp_path / "r.json"
    factcli.evaluate(cfg, outputs=[out], store=False)
    assert len(json.loads(out.read_text())["results"]["results"]) == 2


def test_the_run_is_stored_and_factcli_view_shows_it():
    run = factcli.evaluate(CONFIG, description="from python")
    assert run.stored
    listed = CliRunner().invoke(app, ["list", "--json"])
    assert run.run_id in listed.output
    shown = CliRunner().invoke(app, ["view", run.run_id])
    assert shown.exit_code == 0, shown.output
    assert "backwards" in shown.output and "from python" in shown.output
    unstored = factcli.evaluate(CONFIG, store=False)
    assert unstored.run_id not in CliRunner().invoke(app, ["list", "--json"]).output


def test_bad_input_raises_the_clis_one_line_error(tmp_path):
    with pytest.raises(factcli.FactcliError) as err:
        factcli.evaluate({"prompts": ["x"], "providers": ["echo"], "tests": [{"assert": [{"type": "contans"}]}]})
    assert str(err.value) == "<config>: tests[0].assert[0].type: unknown assertion type 'contans' (did you mean 'contains'?)"
    cfg = write(tmp_path / "c.yaml", "prompts: [x]\nproviders: [echo]\ntests: [{assert: [{type: contans}]}]\n")
    cli = CliRunner().invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar"])
    with pytest.raises(factcli.ConfigError) as err:
        factcli.evaluate(str(cfg))
    assert cli.output.strip().splitlines()[-1] == f"error: {err.value}"
    with pytest.raises(factcli.FactcliError, match="unknown option 'max_concurency'.*did you mean 'max_concurrency'"):
        factcli.evaluate(cfg, max_concurency=2)
    with pytest.raises(factcli.FactcliError, match=r"repeat=0\): expected a whole number"):
        factcli.evaluate(cfg, repeat=0)
    with pytest.raises(factcli.FactcliError, match=r"tests\[0\]\.vars\.f: a Python function can be a provider"):
        factcli.evaluate({"prompts": ["x"], "providers": ["echo"], "tests": [{"vars": {"f": short}}]})


def test_a_function_that_raises_or_returns_nonsense_is_an_error_row():
    def broken(prompt):
        raise ValueError("no model today")

    def odd(prompt):
        return 42

    run = factcli.evaluate({"prompts": ["x"], "providers": [broken, odd], "tests": [{"vars": {}}]}, store=False)
    assert [r.error for r in run.rows] == [
        "broken raised ValueError: no model today",
        'odd must return the output as text or a dict such as {"output": ...}, got int 42']


def test_a_python_function_id_from_the_command_line_is_a_clear_error(tmp_path):
    cfg = write(tmp_path / "c.yaml", "prompts: [x]\nproviders: ['python-function:nowhere']\ntests: [{vars: {}}]\n")
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar"])
    assert result.exit_code == 1
    assert "no Python function named 'nowhere' was passed to factcli.evaluate()" in result.output


def test_to_pandas_or_a_clear_import_error():
    run = factcli.evaluate(CONFIG, store=False)
    records = run.to_records()
    assert records[0]["q"] == "hi" and records[0]["output"] == "Q: HI" and records[0]["pass"] is True
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas"):
            run.to_pandas()
    else:
        assert len(run.to_pandas()) == 4


# ---------------------------------------------------------------- check()


def _judge(model: str) -> dict:
    return {"id": f"openai:chat:{model}", "config": {"apiBaseUrl": os.environ["FAKE_OPENAI_URL"]}}


def test_check_deterministic_and_function_assertions():
    assert factcli.check("Paris is in France", {"type": "contains", "value": "{{city}}"}, vars={"city": "Paris"})
    result = factcli.check("Paris", [{"type": "icontains", "value": "london"}, lambda output: len(output) > 100])
    assert not result and result.score == 0.0
    text = result.explain()
    assert 'icontains failed (score 0.00): Expected output to contain "london"' in text
    assert "python-function failed" in text
    with pytest.raises(factcli.ConfigError, match="unknown assertion type 'equls'"):
        factcli.check("x", {"type": "equls", "value": "x"})


def test_check_model_graded_through_the_fake_server(fake_openai):
    fake_openai.add_rule("Rubric", json.dumps({"pass": False, "score": 0.2, "reason": "It never says hello."}),
                         model="judge")
    result = factcli.check("Goodbye.", {"type": "llm-rubric", "value": "greets the user", "threshold": 0.5},
                           grader=_judge("judge"))
    assert not result.passed and result.score == 0.2
    assert "It never says hello." in result.explain() and "threshold 0.5" in result.explain()
    sent = fake_openai.requests[-1]["json"]["messages"][-1]["content"]
    assert "greets the user" in sent and "Goodbye." in sent
    # the grader's answer is cached: the same check again sends nothing
    before = len(fake_openai.requests)
    factcli.check("Goodbye.", {"type": "llm-rubric", "value": "greets the user", "threshold": 0.5},
                  grader=_judge("judge"))
    assert len(fake_openai.requests) == before


def test_check_claim_level_with_a_scripted_judge(fake_openai):
    fake_openai.add_rule(".", scripted_judge, model="judge")
    result = factcli.check(BAD, {"type": "factual-correctness", "value": REFERENCE, "threshold": 0.8},
                           grader=_judge("judge"), cache=False)
    assert not result.passed and result.score == 0.5
    bad = {(c["side"], c["text"]) for c in result.failing_claims}
    assert ("response", "The Eiffel Tower was built in 1500") in bad
    text = result.explain()
    assert "factual-correctness failed (score 0.50, threshold 0.8)" in text
    assert "[CONTRADICTED] The Eiffel Tower was built in 1500 (from the response, checked against the reference)" in text


def test_check_inside_a_running_loop_and_with_a_function_grader():
    def grader(prompt, options, context):
        return json.dumps({"pass": "kind" in prompt, "score": 1.0, "reason": "stand-in judge"})

    async def cell():
        return factcli.check("You are kind.", {"type": "llm-rubric", "value": "is kind"}, grader=grader)

    result = asyncio.run(cell())
    assert result.passed and result.components[0].reason == "stand-in judge"


def test_the_notebook_example_runs_offline_inside_an_event_loop(tmp_path, monkeypatch, capsys):
    """examples/python/notebook.ipynb, its code cells run in order as a script, the way a Jupyter
    kernel runs them: inside a running event loop."""
    from conftest import ROOT

    notebook = json.loads((ROOT / "examples/python/notebook.ipynb").read_text())
    source = "\n\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__main__"}

    async def kernel():
        exec(compile(source, "notebook.ipynb", "exec"), namespace)  # noqa: S102 - the notebook is the test

    asyncio.run(kernel())
    run = namespace["run"]
    assert (run.successes, run.failures, run.stored) == (3, 3, True)
    assert namespace["good"].passed and not namespace["bad"].passed
    assert "does not name Canberra" in capsys.readouterr().out
    assert run.run_id in CliRunner().invoke(app, ["list", "--json"]).output


def test_evaluate_runs_before_all_hooks_as_the_cli_does(tmp_path):
    """extensions' beforeAll runs before the run is planned, from a script and inside an event loop."""
    write(tmp_path / "hooks.py", "def beforeAll(context, extra):\n"
                                 "    context['suite']['tests'].append({'vars': {'x': 'added'}})\n"
                                 "    return context\n")
    cfg = {"prompts": ["say {{x}}"], "providers": ["echo"], "tests": [{"vars": {"x": 1}}],
           "extensions": [f"file://{tmp_path / 'hooks.py'}:beforeAll"]}
    assert [r.response.output for r in factcli.evaluate(cfg, store=False).rows] == ["say 1", "say added"]

    async def cell():
        return await factcli.evaluate_async(cfg, store=False)

    assert len(asyncio.run(cell()).rows) == 2


def test_a_test_files_warnings_reach_code_as_warnings_not_stderr(tmp_path, capsys):
    """A CSV column that looks like a misspelt special one: the CLI prints it (test_scoring_edges);
    evaluate() gives it as a FactcliWarning and prints nothing."""
    write(tmp_path / "t.csv", "out,_expected\nabc,contains:a\n")
    cfg = {"prompts": ["{{out}}"], "providers": ["echo"], "tests": f"file://{tmp_path / 't.csv'}"}
    from factcli.run.api import FactcliWarning

    with pytest.warns(FactcliWarning, match='column "_expected" has a single underscore'):
        run = factcli.evaluate(cfg, store=False)
    assert len(run.rows) == 1
    assert capsys.readouterr().err == ""


def test_evaluate_leaves_the_garbage_collector_as_the_caller_set_it():
    """Library code changes no process-wide state: the collector's tuning for a run's rows is the
    command line's (cli/root.rows_running), not evaluate()'s."""
    import gc

    seen = []

    def provider(prompt, options=None, context=None):
        seen.append((gc.get_threshold(), gc.get_freeze_count()))
        return {"output": prompt}

    gc.unfreeze()
    before = gc.get_threshold()
    run = factcli.evaluate({"prompts": ["{{q}}"], "providers": [provider], "tests": [{"vars": {"q": "a"}}]},
                           store=False)
    assert len(run.rows) == 1
    assert seen == [(before, 0)] and gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_the_command_line_tunes_the_collector_while_rows_run_and_restores_it(tmp_path):
    import gc

    from factcli.cli.root import GEN0, rows_running

    before = gc.get_threshold()
    with rows_running():
        assert gc.get_threshold()[0] == max(GEN0, before[0]) and gc.get_freeze_count() > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_a_configs_env_is_the_runs_own_and_gone_after_evaluate(monkeypatch):
    """Issue 51 item 4: a config's env: is set while its run loads and executes (a template and the
    user's code read it) and os.environ is exactly as before once evaluate() returns; a later run with
    another config never sees it."""
    monkeypatch.delenv("REVIEW_LEAK", raising=False)
    monkeypatch.setenv("REVIEW_KEPT", "the caller's")
    reads = "__import__('os').environ.get('REVIEW_LEAK')"

    def config(env: dict, expected) -> dict:
        return {"env": env, "prompts": ["[{{ env.REVIEW_LEAK }}]"], "providers": ["echo"],
                "tests": [{"assert": [{"type": "python", "value": f"{reads} == {expected!r}"}]}]}

    before = dict(os.environ)
    a = factcli.evaluate(config({"REVIEW_LEAK": "from-config-A", "REVIEW_KEPT": "config A's"}, "from-config-A"), store=False)
    assert a.successes == 1, a.rows[0].error or a.rows[0].grading.reason
    assert a.rows[0].response.output == "[from-config-A]"
    assert dict(os.environ) == before and "REVIEW_LEAK" not in os.environ
    assert os.environ["REVIEW_KEPT"] == "the caller's"  # a variable the config changed is put back
    b = factcli.evaluate(config({"OTHER": "from-config-B"}, None), store=False)
    assert b.successes == 1, b.rows[0].error or b.rows[0].grading.reason
    assert b.rows[0].response.output == "[]"
    assert dict(os.environ) == before
    with pytest.raises(factcli.FactcliError):  # a run that fails to load leaves no env behind either
        factcli.evaluate({**config({"REVIEW_LEAK": "from-a-bad-config"}, None), "providers": ["nope:x"]}, store=False)
    assert dict(os.environ) == before
