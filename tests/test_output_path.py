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
