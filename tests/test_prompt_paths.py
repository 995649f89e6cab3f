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
