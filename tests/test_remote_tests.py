"""Tests from where people keep them: Hugging Face datasets (a stand-in datasets-server on 127.0.0.1), test
files at a URL, one download cache; and the checks that keep empty prompts from reaching a model: tests
with nothing to run, prompts that render empty, CSV cells kept byte for byte, `-r` replacing providers."""

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import write
from fake_hub import FakeHub
from factcli.cli import app

runner = CliRunner()
TOKEN = "hf_test_token_7c1d9e2f4a"


def run(*args):
    return runner.invoke(app, ["eval", "--no-progress-bar", *map(str, args)])


@pytest.fixture
def hub(monkeypatch):
    for name in ("HF_TOKEN", "HF_API_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with FakeHub() as server:
        monkeypatch.setenv("FACTCLI_HF_DATASETS_SERVER", server.url)
        yield server


def config(tmp_path, tests: str, prompt: str = "Q: {{question}}") -> Path:
    return write(tmp_path / "c.yaml", f"""
prompts: [{json.dumps(prompt)}]
providers:
  - id: openai:chat:m1
    config: {{apiBaseUrl: "{{{{ env.FAKE_OPENAI_URL }}}}", apiKey: sk-test}}
tests: {tests}
""")


def results(out: Path) -> list[dict]:
    return json.loads(out.read_text())["results"]["results"]


def questions(n: int) -> list[dict]:
    return [{"question": f"q{i}", "answer": f"a{i}"} for i in range(n)]


def stored_bytes() -> bytes:
    home = Path(os.environ["FACTCLI_HOME"])
    return b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())


def test_pagination_250_rows_in_3_pages_become_vars(tmp_path, hub, fake_openai):
    hub.add_dataset("acme/qa", questions(250))
    out = tmp_path / "r.json"
    result = run("-c", config(tmp_path, "huggingface://datasets/acme/qa"), "-o", out, "-j", "8")
    assert result.exit_code == 0, result.output
    pages = hub.rows_requests()
    assert [(r.query["offset"], r.query["length"]) for r in pages] == [("0", "100"), ("100", "100"), ("200", "100")]
    assert {(r.query["dataset"], r.query["split"], r.query["config"]) for r in pages} == {("acme/qa", "test", "default")}
    rows = results(out)
    assert len(rows) == 250 and fake_openai.request_count == 250
    assert rows[249]["vars"] == {"question": "q249", "answer": "a249"}


def test_split_config_and_limit_in_one_request(tmp_path, hub, fake_openai):
    hub.add_dataset("acme/qa", questions(300), split="validation", config="hard")
    out = tmp_path / "r.json"
    ref = "huggingface://datasets/acme/qa?split=validation&subset=hard&limit=30"
    assert run("-c", config(tmp_path, json.dumps(ref)), "-o", out).exit_code == 0
    (only,) = hub.rows_requests()
    assert (only.query["split"], only.query["config"], only.query["offset"], only.query["length"]) == \
        ("validation", "hard", "0", "30")
    assert "limit" not in only.query and "subset" not in only.query
    assert len(results(out)) == 30


def test_dataset_inside_a_tests_list_and_values_are_never_templates(tmp_path, hub, fake_openai):
    hub.add_dataset("acme/tricky", [{"question": "say {{ 7*6 }} <<x>>", "n": 3, "tags": {"a": ["b"]}}])
    out = tmp_path / "r.json"
    tests = '["huggingface://datasets/acme/tricky", {vars: {question: written}}]'
    assert run("-c", config(tmp_path, tests), "-o", out).exit_code == 0
    rows = results(out)
    assert rows[0]["vars"] == {"question": "say {{ 7*6 }} <<x>>", "n": 3, "tags": {"a": ["b"]}}
    assert rows[0]["prompt"]["raw"] == "Q: say {{ 7*6 }} <<x>>"
    assert rows[1]["vars"] == {"question": "written"}


def test_a_dataset_named_in_a_local_tests_file(tmp_path, hub, fake_openai):
    hub.add_dataset("acme/qa", questions(2))
    write(tmp_path / "tests.yaml", "- huggingface://datasets/acme/qa\n- vars: {question: local}\n")
    out = tmp_path / "r.json"
    assert run("-c", config(tmp_path, "file://tests.yaml"), "-o", out).exit_code == 0
    assert [r["vars"]["question"] for r in results(out)] == ["q0", "q1", "local"]


def test_gated_dataset_with_and_without_a_token(tmp_path, hub, fake_openai, monkeypatch):
    hub.add_dataset("acme/gated", questions(3), gated_token=TOKEN)
    cfg = config(tmp_path, "huggingface://datasets/acme/gated")
    result = run("-c", cfg)
    assert result.exit_code == 1 and fake_openai.request_count == 0
    assert "Hugging Face dataset acme/gated: HTTP 401" in result.output and "set HF_TOKEN" in result.output
    assert "Traceback" not in result.output
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", "hf_wrong_one_0000")
    monkeypatch.setenv("HF_API_TOKEN", TOKEN)  # HF_API_TOKEN comes before HUGGING_FACE_HUB_TOKEN
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-o", out)
    assert result.exit_code == 0, result.output
    assert hub.rows_requests()[-1].headers["Authorization"] == f"Bearer {TOKEN}"
    assert len(results(out)) == 3
    assert TOKEN.encode() not in stored_bytes() and TOKEN not in out.read_text() and TOKEN not in result.output
    monkeypatch.setenv("HF_TOKEN", "hf_first_of_all_1111")  # HF_TOKEN comes first
    run("-c", cfg, "--no-cache")
    assert hub.rows_requests()[-1].headers["Authorization"] == "Bearer hf_first_of_all_1111"


@pytest.mark.parametrize("ref, words", [
    ("huggingface://datasets/acme/nope", "Hugging Face dataset acme/nope: HTTP 404"),
    ("huggingface://datasets/acme/qa?split=train", "Hugging Face dataset acme/qa: HTTP 404 (not found: Not found.)"),
    ("huggingface://datasets/acme", "expected huggingface://datasets/OWNER/REPO"),
])
def test_unknown_dataset_or_split_is_one_line_and_no_call(tmp_path, hub, fake_openai, ref, words):
    hub.add_dataset("acme/qa", questions(2))
    result = run("-c", config(tmp_path, json.dumps(ref)))
    assert result.exit_code == 1 and fake_openai.request_count == 0
    assert words in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_a_server_that_is_down_or_not_json(tmp_path, hub, fake_openai, monkeypatch):
    hub.add_file("rows", b"<html>maintenance</html>", "text/html")
    monkeypatch.setenv("FACTCLI_HF_DATASETS_SERVER", hub.url + "/files")
    result = run("-c", config(tmp_path, "huggingface://datasets/acme/qa"))
    assert result.exit_code == 1 and "the server's answer is not JSON" in result.output
    monkeypatch.setenv("FACTCLI_HF_DATASETS_SERVER", "http://127.0.0.1:9")  # nothing listens there
    result = run("-c", config(tmp_path, "huggingface://datasets/acme/qa"))
    assert result.exit_code == 1 and "acme/qa: cannot download" in result.output
    assert fake_openai.request_count == 0


def test_download_cache_second_run_no_request_no_cache_downloads_again_and_clear(tmp_path, hub, fake_openai):
    hub.add_dataset("acme/qa", questions(120))
    hub.add_file("t.csv", b"question\nfrom the web\n")
    cfg = config(tmp_path, json.dumps(["huggingface://datasets/acme/qa", hub.file_url("t.csv")]))
    assert run("-c", cfg).exit_code == 0
    assert len(hub.requests) == 3  # two pages and the file
    assert run("-c", cfg).exit_code == 0
    assert len(hub.requests) == 3  # all from the cache
    assert run("-c", cfg, "--no-cache").exit_code == 0
    assert len(hub.requests) == 6
    cleared = runner.invoke(app, ["cache", "clear"])
    assert cleared.exit_code == 0 and "2 downloads" in cleared.output
    assert run("-c", cfg).exit_code == 0
    assert len(hub.requests) == 9


@pytest.mark.parametrize("name, body", [
    ("t.csv", b'question,__expected\n"line one\r\nline two",contains:one\n'),
    ("t.json", json.dumps([{"vars": {"question": "line one\r\nline two"}, "assert": [
        {"type": "contains", "value": "one"}]}]).encode()),
    ("t.jsonl", json.dumps({"vars": {"question": "line one\r\nline two"}}).encode() + b"\n"),
    ("t.yaml", b'- vars: {question: "line one\\r\\nline two"}\n'),
])
def test_test_file_at_a_url_by_its_format(tmp_path, hub, fake_openai, name, body):
    hub.add_file(name, body)
    out = tmp_path / "r.json"
    result = run("-c", config(tmp_path, json.dumps(hub.file_url(name))), "-o", out)
    assert result.exit_code == 0, result.output
    (row,) = results(out)
    assert row["vars"]["question"] == "line one\r\nline two"
    assert fake_openai.requests[-1]["json"]["messages"][-1]["content"] == "Q: line one\r\nline two"


def test_a_url_that_fails_names_it(tmp_path, hub, fake_openai):
    result = run("-c", config(tmp_path, json.dumps(hub.file_url("gone.csv"))))
    assert result.exit_code == 1 and fake_openai.request_count == 0
    assert f"{hub.file_url('gone.csv')}: HTTP 404" in result.output
    result = run("-c", config(tmp_path, json.dumps(hub.url + "/files/tests.txt")))
    assert result.exit_code == 1 and "cannot tell the format" in result.output


def test_a_password_in_a_url_is_not_repeated(tmp_path, hub, fake_openai):
    url = hub.file_url("gone.csv").replace("http://", "http://ann:pw-4711@")
    result = run("-c", config(tmp_path, json.dumps(url)))
    assert result.exit_code == 1 and "http://***@127.0.0.1" in result.output and "pw-4711" not in result.output


def test_google_sheet_url_reads_its_csv_export():
    from factcli.config.remote import sheet_csv_url

    base = "https://docs.google.com/spreadsheets/d/1AbC-xyz_9"
    assert sheet_csv_url(base + "/edit#gid=42") == base + "/export?format=csv&gid=42"
    assert sheet_csv_url(base + "/edit") == base + "/export?format=csv"
    assert sheet_csv_url("https://example.com/tests.csv") is None


def test_crlf_inside_a_quoted_local_csv_cell_reaches_the_server_as_crlf(tmp_path, fake_openai):
    (tmp_path / "t.csv").write_bytes(b'question\r\n"first\r\nsecond"\r\nplain\r\n')
    out = tmp_path / "r.json"
    assert run("-c", config(tmp_path, "file://t.csv"), "-o", out).exit_code == 0
    sent = sorted(r["json"]["messages"][-1]["content"] for r in fake_openai.requests)
    assert sent == ["Q: first\r\nsecond", "Q: plain"]


def test_a_test_with_nothing_to_run_is_a_config_error(tmp_path, fake_openai):
    cfg = config(tmp_path, "[{vars: {question: ok}}, {question: misplaced, description: oops}]")
    result = run("-c", cfg)
    assert result.exit_code == 1 and fake_openai.request_count == 0
    assert "tests[1]" in result.output and "a test needs one of vars, assert, options" in result.output
    assert "vars go under `vars:`" in result.output


def test_a_prompt_that_renders_empty_for_every_test_is_refused(tmp_path, hub, fake_openai):
    hub.add_dataset("acme/qa", [{"problem": "p1"}, {"problem": "p2"}])
    result = run("-c", config(tmp_path, "huggingface://datasets/acme/qa", prompt="{{question}}"))
    assert result.exit_code == 1 and fake_openai.request_count == 0
    assert "renders empty for every test (it uses question; no test has that var)" in result.output
    # one test that fills it is enough
    cfg = config(tmp_path, '["huggingface://datasets/acme/qa", {vars: {question: q}}]', prompt="{{question}}")
    assert run("-c", cfg).exit_code == 0


def test_providers_flag_replaces_the_configs_providers(tmp_path, fake_openai):
    cfg = write(tmp_path / "c.yaml", """
prompts: ["Q: {{question}}"]
providers: [openai:chat:from-config, openai:chat:other]
tests: [{vars: {question: hi}}]
""")
    fake_openai_env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": fake_openai.url}
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "--no-progress-bar", "-c", str(cfg), "-r", "openai:chat:mine",
                                 "-o", str(out)], env=fake_openai_env)
    assert result.exit_code == 0, result.output
    assert [r["json"]["model"] for r in fake_openai.requests] == ["mine"]
    assert [r["provider"]["id"] for r in results(out)] == ["openai:chat:mine"]
    result = runner.invoke(app, ["eval", "--no-progress-bar", "-c", str(cfg), "--providers", "openai:chat:a",
                                 "-r", "openai:chat:b", "--no-cache"], env=fake_openai_env)
    assert result.exit_code == 0
    assert sorted(r["json"]["model"] for r in fake_openai.requests[1:]) == ["a", "b"]


def test_cells_the_server_cuts_short_are_read_whole(tmp_path, hub, fake_openai):
    """The datasets-server cuts long cells when a page is big (`truncated_cells`): such rows are read
    alone, so no test gets a shortened var."""
    long = [{"question": f"q{i} " + "long text " * 30, "answer": f"a{i}"} for i in range(5)]
    hub.add_dataset("acme/long", long)
    hub.page_bytes = 500
    out = tmp_path / "r.json"
    result = run("-c", config(tmp_path, "huggingface://datasets/acme/long"), "-o", out)
    assert result.exit_code == 0, result.output
    assert sorted(r["vars"]["question"] for r in results(out)) == sorted(x["question"] for x in long)
    assert [q.query["length"] for q in hub.rows_requests()] == ["100"] + ["1"] * 5
