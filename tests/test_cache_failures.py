"""The response cache keeps only replies that could be used: a grader reply that is not a verdict,
an empty output and an error response are asked again next run; `show` and the web cell page say
which replies came from the cache; --no-cache neither reads nor writes."""

import json

from conftest import write
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()

CONFIG = """
prompts: ["Q: {{question}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest:
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - vars: {question: "capital of France?"}
    assert: [{type: llm-rubric, value: "names Paris"}]
"""


def _eval(cfg, *extra):
    return runner.invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-table", *extra])


def _judge_calls(server) -> int:
    return sum(1 for r in server.requests if r["json"].get("model") == "judge")


def test_an_unreadable_grader_reply_is_not_cached_and_a_good_one_is_marked_cached(fake_openai, tmp_path):
    cfg = write(tmp_path / "c.yaml", CONFIG)
    fake_openai.add_rule(r"names Paris", "I think it is fine, probably", model="judge")  # not JSON
    first = _eval(cfg)
    assert first.exit_code == 100, first.output
    assert _judge_calls(fake_openai) == 1
    fake_openai.clear_rules()
    fake_openai.add_rule(r"names Paris", '{"pass": true, "score": 1, "reason": "it does"}', model="judge")
    second = _eval(cfg)  # the grader is fixed: it is asked again, not read back from the cache
    assert second.exit_code == 0, second.output
    assert _judge_calls(fake_openai) == 2
    third = _eval(cfg)  # now the good reply, and the model's, come from the cache
    assert third.exit_code == 0 and _judge_calls(fake_openai) == 2
    shown = " ".join(runner.invoke(app, ["show", "latest", "0"]).output.split())
    assert "grading: 1 call, $0 (1 from the response cache)" in shown, shown
    assert "output from the response cache" in shown


def test_a_cut_off_grader_reply_is_not_cached(fake_openai, tmp_path):
    cfg = write(tmp_path / "c.yaml", CONFIG)
    fake_openai.add_rule(r"names Paris", {"content": '{"pass": tr', "finish_reason": "length"}, model="judge")
    _eval(cfg)
    _eval(cfg)
    assert _judge_calls(fake_openai) == 2


def test_an_empty_output_and_an_error_response_are_asked_again(fake_openai, tmp_path):
    cfg = write(tmp_path / "c.yaml", CONFIG.replace("assert: [{type: llm-rubric, value: \"names Paris\"}]",
                                                    "assert: [{type: contains, value: Paris}]"))
    fake_openai.add_rule(r"capital", "", model="m")
    _eval(cfg)
    _eval(cfg)
    assert len(fake_openai.requests) == 2  # the empty reply was not kept
    fake_openai.clear_rules()
    fake_openai.enqueue_fault(400)  # not retried: an error response
    failed = _eval(cfg)
    assert failed.exit_code != 0
    fake_openai.add_rule(r"capital", "Paris", model="m")
    before = len(fake_openai.requests)
    assert _eval(cfg).exit_code == 0 and len(fake_openai.requests) == before + 1


def test_no_cache_neither_reads_nor_writes(fake_openai, tmp_path):
    cfg = write(tmp_path / "c.yaml", CONFIG)
    fake_openai.add_rule(r"names Paris", '{"pass": true, "score": 1, "reason": "ok"}', model="judge")
    _eval(cfg)
    assert len(fake_openai.requests) == 2
    _eval(cfg, "--no-cache")  # does not read: both calls are made again
    assert len(fake_openai.requests) == 4
    runner.invoke(app, ["cache", "clear"])
    _eval(cfg, "--no-cache")
    _eval(cfg)  # --no-cache wrote nothing: asked again
    assert len(fake_openai.requests) == 8


def test_the_web_cell_page_marks_cached_replies(fake_openai, tmp_path):
    import warnings

    warnings.filterwarnings("ignore", message=".*httpx.*")
    from starlette.testclient import TestClient

    from factcli.store.database import Store
    from factcli.web.app import create_app

    cfg = write(tmp_path / "c.yaml", CONFIG)
    db = tmp_path / "w.db"
    fake_openai.add_rule(r"names Paris", '{"pass": true, "score": 1, "reason": "ok"}', model="judge")
    _eval(cfg, "--db", db)
    with Store.open(db) as store:
        fresh = store.resolve(None)["id"]
    _eval(cfg, "--db", db)
    with Store.open(db) as store:
        again = store.resolve(None)["id"]
    client = TestClient(create_app(db, token="t"))
    first, second = (client.get(f"/runs/{r}/cell/0/0/0").text for r in (fresh, again))
    assert "response cache" not in first
    assert "output from the response cache" in second and "(1 from the response cache)" in second
