"""State that lives with its run (issue 51 item 4): a config's `nunjucksFilters` are its suite's, in
force while that run loads, plans and executes and nowhere else, so two runs in one process (one
prepared while another waits to execute, as the pytest plugin does, or side by side in asyncio
tasks) never render with each other's filters; factscore's dense-retrieval vectors are kept by the
run that computed them and dropped with it, and `--no-cache` keeps none between rows."""

import asyncio
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
