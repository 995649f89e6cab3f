"""outputPath written as `file://x.csv` names the file x.csv (promptfoo's echo-1000-tests example)."""

from conftest import write
from typer.testing import CliRunner

from factcli.cli import app


def test_output_path_with_the_file_scheme(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = write(tmp_path / "c.yaml", "prompts: [hi]\nproviders: [echo]\noutputPath: file://out.csv\n")
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar"])
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "out.csv").read_text().splitlines()
    assert lines[0].startswith("[echo] hi,Status,") and lines[1].startswith("hi,PASS,") and len(lines) == 2
    assert not (tmp_path / "file:").exists()


# ---------------------------------------------------------------- every output path created before any call

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

runner = CliRunner()
SYS_READ_ONLY = Path("/sys/factcli-probe.json")  # sysfs refuses new files to root too (chmod does not stop root)


@pytest.fixture
def server(fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    return fake_openai


def _config(tmp_path, extra: str = "") -> Path:
    return write(tmp_path / "c.yaml", f"prompts: ['Q: {{{{n}}}}']\nproviders: [openai:chat:gpt-4o-mini]\n{extra}"
                                      "tests:\n  - vars: {n: '1'}\n    assert: [{type: contains, value: a}]\n")


def _refused_before_any_call(result, server, line: str) -> None:
    assert result.exit_code == 1, result.output
    assert line in " ".join(result.output.split()), result.output
    assert server.request_count == 0


def test_a_folder_that_cannot_be_made_is_found_before_any_call(server, tmp_path):
    # os.access says root may write in /proc; only making the folder shows it cannot be made
    result = runner.invoke(app, ["eval", "-c", str(_config(tmp_path)), "-o", "/proc/nope/results.json",
                                 "--no-progress-bar", "--no-cache"])
    _refused_before_any_call(result, server,
                             "-o /proc/nope/results.json: cannot create /proc/nope: No such file or directory")
    assert "cannot write" not in result.output


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs sysfs")
def test_a_read_only_folder_is_found_before_any_call(server, tmp_path):
    result = runner.invoke(app, ["eval", "-c", str(_config(tmp_path)), "-o", str(SYS_READ_ONLY),
                                 "--no-progress-bar", "--no-cache"])
    _refused_before_any_call(result, server, f"-o {SYS_READ_ONLY}: cannot create {SYS_READ_ONLY}: ")
    assert not SYS_READ_ONLY.exists()


def test_a_parent_that_is_a_file_is_found_before_any_call(server, tmp_path):
    (tmp_path / "blocker").write_text("a file, not a folder")
    for target in (tmp_path / "blocker" / "r.json", tmp_path / "blocker" / "deeper" / "r.json"):
        result = runner.invoke(app, ["eval", "-c", str(_config(tmp_path)), "-o", str(target),
                                     "--no-progress-bar", "--no-cache"])
        _refused_before_any_call(result, server, f"-o {target}: {tmp_path / 'blocker'} is a file, not a folder "
                                                 "(Not a directory): name another path")
    assert (tmp_path / "blocker").read_text() == "a file, not a folder"


def test_the_config_output_path_is_checked_the_same_way(server, tmp_path):
    result = runner.invoke(app, ["eval", "-c", str(_config(tmp_path, "outputPath: /proc/nope/results.json\n")),
                                 "--no-progress-bar", "--no-cache"])
    _refused_before_any_call(result, server, "outputPath /proc/nope/results.json: cannot create /proc/nope: ")


def test_a_deep_new_folder_is_made_and_nothing_is_left_when_the_run_stops_first(server, tmp_path):
    deep = tmp_path / "a" / "b" / "c" / "results.json"
    server.add_rule(".", "a fine answer")
    result = runner.invoke(app, ["eval", "-c", str(_config(tmp_path)), "-o", str(deep), "--no-progress-bar",
                                 "--no-cache"])
    assert result.exit_code == 0, result.output
    assert json.loads(deep.read_text())["results"]["results"][0]["response"]["output"] == "a fine answer"
    assert server.request_count == 1
    # a run refused for another reason: the probe's folders and file are gone again, an old file is kept whole
    server.reset()
    typo = write(tmp_path / "typo.yaml", _config(tmp_path).read_text().replace("openai:chat", "opnai:chat"))
    other = tmp_path / "x" / "y" / "results.json"
    result = runner.invoke(app, ["eval", "-c", str(typo), "-o", str(other), "-o", str(deep),
                                 "--no-progress-bar", "--no-cache"])
    _refused_before_any_call(result, server, "unknown provider 'opnai'")
    assert not (tmp_path / "x").exists()
    assert json.loads(deep.read_text())["results"]["results"][0]["response"]["output"] == "a fine answer"


def test_calibrate_checks_its_output_before_any_grader_call(server, tmp_path):
    labels = write(tmp_path / "labels.jsonl", '{"id": "q1", "question": "Capital of France?", '
                                              '"reference": "Paris", "output": "Paris", "label": "pass"}\n')
    result = runner.invoke(app, ["calibrate", str(labels), "--grader", "openai:chat:judge", "--no-write",
                                 "--no-progress-bar", "-o", "/proc/nope/metrics.json"])
    _refused_before_any_call(result, server, "-o /proc/nope/metrics.json: cannot create /proc/nope: "
                                             "No such file or directory")
    assert len(result.output.strip().splitlines()) == 1


def test_export_checks_every_output_before_writing_any(server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    server.add_rule(".", "a fine answer")
    assert runner.invoke(app, ["eval", "-c", str(_config(tmp_path)), "--no-progress-bar"]).exit_code == 0
    (tmp_path / "blocker").write_text("")
    result = runner.invoke(app, ["export", "latest", "-o", "first.csv", "-o", "blocker/r.json"])
    assert result.exit_code == 1, result.output
    assert result.output.strip() == ("error: -o blocker/r.json: blocker is a file, not a folder (Not a directory): "
                                     "name another path")
    assert not (tmp_path / "first.csv").exists()
    result = runner.invoke(app, ["ratings", "export", "latest", "-o", "/proc/nope/labels.csv"])
    assert result.exit_code == 1, result.output
    assert result.output.strip() == "error: -o /proc/nope/labels.csv: cannot create /proc/nope: No such file or directory"
