"""State that lives with its run (issue 51 item 4): a config's `nunjucksFilters` are its suite's, in
force while that run loads, plans and executes and nowhere else, so two runs in one process (one
prepared while another waits to execute, as the pytest plugin does, or side by side in asyncio
tasks) never render with each other's filters; factscore's dense-retrieval vectors are kept by the
run that computed them and dropped with it, and `--no-cache` keeps none between rows; the plan's steps
are narrowed only through their one object's named operations (run/planning/steps.py)."""

import asyncio
import json
import threading

import pytest
from conftest import write

import factcli
from factcli import templating
from factcli.errors import ConfigError
from factcli.run.api import Evaluation, parse_options, run_sync


def _filters(tmp_path) -> str:
    write(tmp_path / "filters.py", "def tag_a(v):\n    return f'A<{v}>'\n\n\ndef tag_b(v):\n    return f'B<{v}>'\n")
    return str(tmp_path / "filters.py")


def _config(filters_file: str | None, fn: str, provider, n: int = 3) -> dict:
    """A run whose prompt and assertion both use the filter `tag` (the assertion renders it after the
    call: the filter must still be this run's then)."""
    cfg = {"prompts": ["{{ q | tag }}"], "providers": [provider],
           "tests": [{"vars": {"q": f"q{i}"}, "assert": [{"type": "equals", "value": "{{ q | tag }}"}]}
                     for i in range(n)]}
    if filters_file:
        cfg["nunjucksFilters"] = {"tag": f"file://{filters_file}:{fn}"}
    return cfg


def echo(prompt, options, context):
    return prompt


def _outputs(run) -> list[str]:
    assert run.errors == 0 and run.failures == 0, [r.error or r.grading.reason for r in run.rows]
    return [r.response.output for r in run.rows]


def test_two_runs_prepared_then_executed_each_use_their_own_filters(tmp_path):
    """Run A loaded and checked, then run B (the pytest plugin collects every config's rows before
    any runs); A executes after B's load: its rows still render with A's filter, not B's."""
    file = _filters(tmp_path)
    a = Evaluation(_config(file, "tag_a", echo), parse_options(None, {"store": False}))
    b = Evaluation(_config(file, "tag_b", echo), parse_options(None, {"store": False}))
    assert _outputs(run_sync(a.execute)) == ["A<q0>", "A<q1>", "A<q2>"]
    assert _outputs(run_sync(b.execute)) == ["B<q0>", "B<q1>", "B<q2>"]
    # and neither is left behind for a template rendered outside a run, nor for a config without filters
    with pytest.raises(templating.TemplateError, match="unknown filter 'tag'"):
        templating.render("{{ q | tag }}", {"q": "x"})
    with pytest.raises(ConfigError, match="unknown filter 'tag'"):
        factcli.evaluate(_config(None, "", echo), store=False)


def test_two_runs_side_by_side_in_asyncio_never_share_filters(tmp_path):
    """evaluate_async twice in one event loop: each run's first calls wait for the other's (a barrier),
    so both runs are executing at once, and every prompt and assertion of each renders with its own
    filter."""
    file = _filters(tmp_path)
    barrier = threading.Barrier(2, timeout=20)
    seen = {"a": 0, "b": 0}

    def waiting(name):
        def provider(prompt, options, context):
            seen[name] += 1
            if seen[name] == 1:
                barrier.wait()  # the other run has started executing too
            return prompt
        return provider

    async def both():
        return await asyncio.gather(
            factcli.evaluate_async(_config(file, "tag_a", waiting("a"), n=6), store=False, max_concurrency=2),
            factcli.evaluate_async(_config(file, "tag_b", waiting("b"), n=6), store=False, max_concurrency=2))

    a, b = asyncio.run(both())
    assert _outputs(a) == [f"A<q{i}>" for i in range(6)]
    assert _outputs(b) == [f"B<q{i}>" for i in range(6)]


def test_filters_a_before_all_hook_returns_are_the_runs_from_then_on(tmp_path):
    """A beforeAll hook that gives the suite other nunjucksFilters: the run renders with those, the
    next run (without the hook) with its own again."""
    file = _filters(tmp_path)
    write(tmp_path / "hook.py", "def hook(name, context):\n"
                                "    if name == 'beforeAll':\n"
                                "        suite = context['suite']\n"
                                f"        suite['nunjucksFilters'] = {{'tag': 'file://{file}:tag_b'}}\n"
                                "        return {'suite': suite}\n")
    cfg = {**_config(file, "tag_a", echo), "extensions": [f"file://{tmp_path / 'hook.py'}:hook"]}
    assert _outputs(factcli.evaluate(cfg, store=False)) == ["B<q0>", "B<q1>", "B<q2>"]
    assert _outputs(factcli.evaluate(_config(file, "tag_a", echo), store=False)) == ["A<q0>", "A<q1>", "A<q2>"]


# ---------------------------------------------------------------- factscore's dense-retrieval vectors


def _dense_eval(tmp_path, fake_openai, *flags) -> list[str]:
    """A `profile: reference` factscore run (dense retrieval) of two rows about the same topic, one row
    at a time; returns the texts the embedding model was asked for in this run."""
    from test_factscore import CONFIG, CURIE_ANSWER, CURIE_DOC, CURIE_FACTS, _block, _numbered

    from factcli.cli import app
    from typer.testing import CliRunner

    write(tmp_path / "kb" / "Marie Curie.txt", CURIE_DOC)
    fake_openai.add_rule("bio of", CURIE_ANSWER, model="m")
    for word, vector in (("born", [1.0, 0, 0]), ("Physics", [0, 1.0, 0]), ("Chemistry", [0, 0, 1.0])):
        fake_openai.add_rule(word, vector, model="emb")
    fake_openai.add_rule("<sentences>", lambda body: json.dumps({"facts": [
        CURIE_FACTS[s] for s in _numbered(_block(body["messages"][-1]["content"], "sentences"))]}), model="judge")
    fake_openai.add_rule("<passages>", lambda body: json.dumps({"verdicts": [
        {"fact": f, "verdict": True, "reason": "r", "evidence": 1}
        for f in _numbered(_block(body["messages"][-1]["content"], "facts"))]}), model="judge")
    emb = {"id": "openai:embedding:emb", "config": {"apiBaseUrl": "{{ env.FAKE_OPENAI_URL }}"}}
    config = {"knowledge": str(tmp_path / "kb"), "profile": "reference", "k": 2, "passageWords": 10,
              "embeddingProvider": emb}
    cfg = (CONFIG % {"config": json.dumps(config)}).split("tests:")[0] + \
        "tests:\n  - vars: {topic: Marie Curie, n: 1}\n  - vars: {topic: Marie Curie, n: 2}\n"
    before = len(fake_openai.requests)
    result = CliRunner().invoke(app, ["eval", "-c", str(write(tmp_path / "dense.yaml", cfg)), "-j", "1",
                                      "--no-progress-bar", "--no-table", "--no-write", *flags])
    assert result.exit_code in (0, 100) and "2/2 rows" in result.output and "Errors: 0" in result.output, result.output
    embedded = [r["json"]["input"] for r in fake_openai.requests[before:] if r["json"].get("model") == "emb"]
    return [x if isinstance(x, str) else x[0] for x in embedded]


def test_a_run_embeds_each_text_once_and_the_next_run_in_the_process_embeds_them_again(tmp_path, fake_openai,
                                                                                        monkeypatch):
    """Run 1 (cache on): its second row retrieves from the vectors its first row kept: 3 passages and
    3 queries embedded once. Run 2, in the same process with an empty response cache (another
    FACTCLI_HOME): none of run 1's vectors; it asks the model for every one of them again."""
    first = _dense_eval(tmp_path, fake_openai)
    assert len(first) == len(set(first)) == 6
    monkeypatch.setenv("FACTCLI_HOME", str(tmp_path / "another-home"))
    second = _dense_eval(tmp_path, fake_openai)
    assert sorted(second) == sorted(first)


def test_no_cache_keeps_no_vector_between_rows_nor_runs(tmp_path, fake_openai):
    """--no-cache: each row embeds its passages and queries again (the same 6 texts twice), and so
    does a second such run in the same process (a vector cache across runs would have served them)."""
    for _ in range(2):
        texts = _dense_eval(tmp_path, fake_openai, "--no-cache")
        assert len(texts) == 12 and len(set(texts)) == 6 and all(texts.count(t) == 2 for t in texts)


# ---------------------------------------------------------------- the plan's steps, one object


def test_the_runs_steps_are_narrowed_only_through_their_named_operations():
    import dataclasses

    from factcli.config.loader import build_suite
    from factcli.run import runner

    suite = build_suite({"prompts": ["{{q}}"], "providers": ["echo", {"id": "echo", "label": "two"}],
                         "tests": [{"description": f"t{i}", "vars": {"q": f"q{i}"}} for i in range(3)]}, None)
    run = runner.prepare(suite, runner.RunOptions())
    steps = run.steps
    assert len(steps) == 6 and run.total_steps == 6
    assert steps.tests_selected(suite.tests) is None  # every test planned
    assert (steps.first().test_idx, steps.first().prompt_idx) == (0, 0)
    keyed = steps.keyed()
    assert list(keyed) == [(t, p, 0) for t in range(3) for p in range(2)]
    steps.leave_out({(0, 0, 0), (0, 1, 0)}, keyed)  # --resume: the rows kept are not run again
    assert [k for k in steps.keyed()] == list(keyed)[2:]
    assert all(s is keyed[(s.test_idx, s.prompt_idx, s.repeat_idx)] for s in steps)  # the objects the caller holds
    assert steps.tests_selected(suite.tests) == [1, 2]
    steps.keep_only({(2, 1, 0)})  # the pytest items -k left
    assert [(s.test_idx, s.prompt_idx) for s in steps] == [(2, 1)] and len(steps) == 1
    steps.map(lambda s: dataclasses.replace(s, vars={"q": "changed"}))  # calibrate's variants
    assert [s.vars for s in steps] == [{"q": "changed"}]
    filtered = runner.prepare(suite, runner.RunOptions(filter_pattern="t[02]"))
    assert filtered.steps.tests_selected(suite.tests) == [0, 2]
