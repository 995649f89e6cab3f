"""A one-line prompt is a file only when it names files that exist (promptfoo reads
`prompts: [prompts/*.txt]` without file://, and stops on `Answer yes/no: {{ q }}`: part A §2.1)."""

from conftest import write

from factcli.config.loader import load_suite


def _prompts(tmp_path, prompts: str) -> list[str]:
    cfg = write(tmp_path / "c.yaml", f"prompts: {prompts}\nproviders: [echo]\n")
    return [p.raw for p in load_suite([cfg]).prompts]


def test_an_existing_file_or_glob_without_file_scheme_is_read(tmp_path):
    write(tmp_path / "prompts" / "a.txt", "A: {{q}}")
    write(tmp_path / "prompts" / "b.txt", "B: {{q}}")
    write(tmp_path / "single.txt", "S: {{q}}")
    assert _prompts(tmp_path, "['prompts/*.txt', single.txt]") == ["A: {{q}}", "B: {{q}}", "S: {{q}}"]


def test_prompts_that_only_look_like_paths_stay_text(tmp_path):
    texts = ["'Answer yes/no: {{ q }}'", "'What is 3.14'", "'Give an example, e.g.'", "'Rate 1*5 please'",
             "'Explain why x.py:foo'", "'no/such/file.txt'"]
    assert _prompts(tmp_path, "[" + ", ".join(texts) + "]") == [t.strip("'") for t in texts]


def test_a_prompt_no_path_could_be_is_text(tmp_path):
    """A NUL byte (the fuzz test's find: `~\\x00` made expanduser raise) names no file."""
    assert _prompts(tmp_path, '["~\\x00", "a\\x00b.txt", "~nobody\\x00/x"]') == ["~\x00", "a\x00b.txt", "~nobody\x00/x"]


# ---------------------------------------------------------------- prompt CSV files (promptfoo's golden: tests/promptfoo_configs/prompt_csv)

import pytest  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from factcli.cli import app  # noqa: E402
from factcli.errors import ConfigError  # noqa: E402


def _eval(tmp_path, prompts: str):
    cfg = write(tmp_path / "c.yaml", f"prompts: {prompts}\nproviders: [openai:chat:gpt-4o-mini]\n"
                                     "tests: [{vars: {topic: cats}}]\n")
    return CliRunner().invoke(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-cache", "--no-write"])


@pytest.fixture
def server(fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    return fake_openai


def test_each_row_of_a_prompt_csv_is_sent_and_blank_rows_are_not(server, tmp_path):
    write(tmp_path / "p.csv", 'prompt,label\n"Tell me, briefly, about {{topic}}",brief\n\n,no prompt\nName a {{topic}} breed,\n\n')
    result = _eval(tmp_path, "[file://p.csv]")
    assert result.exit_code == 0, result.output
    sent = sorted(r["json"]["messages"][-1]["content"] for r in server.requests)
    assert sent == ["Name a cats breed", "Tell me, briefly, about cats"]
    labels = [p.label for p in load_suite([tmp_path / "c.yaml"]).prompts]
    assert labels == ["brief", "Prompt 2 - Name a {{topic}} breed"]  # N counts the rows with a prompt


def test_a_prompt_csv_without_a_prompt_column_is_refused_before_any_call(server, tmp_path):
    write(tmp_path / "p.csv", "question,label\nTell me about {{topic}},q\n")
    result = _eval(tmp_path, "[file://p.csv]")
    assert result.exit_code == 1, result.output
    assert ("prompts[0]: p.csv has no 'prompt' column (its columns: question, label): a prompt CSV has a 'prompt' "
            "column and optionally a 'label' column") in " ".join(result.output.split())
    assert server.request_count == 0


@pytest.mark.parametrize("text, message", [
    ("prompt\n\n  \n", "no prompts in p.csv"),  # a header alone: promptfoo's `There are no prompts in …`
    ("prompt,label\n,a\n  ,b\n", "no prompts in p.csv: every 'prompt' cell is empty"),
    ("prompt,label\nAsk {{ topic ,x\n", "p.csv: prompt 1:"),  # each row's template checked as it is read
])
def test_a_prompt_csv_without_a_prompt_is_refused(tmp_path, text, message):
    write(tmp_path / "p.csv", text)
    with pytest.raises(ConfigError) as info:
        _prompts(tmp_path, "[file://p.csv]")
    assert message in str(info.value)


def test_prompt_csv_cells_as_promptfoo_reads_them(tmp_path, monkeypatch):
    write(tmp_path / "p.csv", 'prompt,label\n  "after spaces {{q}}",x\n"  own spaces {{q}}  ",y\n')
    # a quote after spaces opens a quoted cell (csv-parse's trim); a quoted cell's own edge spaces are trimmed
    # too, where promptfoo keeps them (docs/promptfoo-departures.md)
    assert _prompts(tmp_path, "[file://p.csv]") == ["after spaces {{q}}", "own spaces {{q}}"]
    # the other departure: spaces after a closing quote, which promptfoo trims, read the file a line at a
    # time (as a quote left open does in both), with a warning
    write(tmp_path / "p.csv", 'prompt,label\n"spaces after {{q}}"  ,x\n')
    assert _prompts(tmp_path, "[file://p.csv]") == ["prompt,label", '"spaces after {{q}}"  ,x']
    write(tmp_path / "s.csv", "prompt;label\nOne, two {{q}};x\n")
    monkeypatch.setenv("PROMPTFOO_CSV_DELIMITER", ";")
    assert _prompts(tmp_path, "[file://s.csv]") == ["One, two {{q}}"]
