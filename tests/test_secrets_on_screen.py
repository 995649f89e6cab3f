"""Secrets everywhere the screen is (issue 39; the rule is store/redact.py's): --no-write shows what the
stored path shows, a secret rendered into a prompt is redacted in the table's header and labels, a
--db password is scrubbed like FACTCLI_DB's, and the response cache is readable by its user alone."""

import stat

from conftest import write
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()
KEY = "sk-test-0123456789abcdef"


def cli(*args):
    return runner.invoke(app, [*map(str, args)], env={"COLUMNS": "200"})


def test_no_write_scrubs_a_key_quoted_by_a_provider_error_as_the_stored_path_does(tmp_path, fake_openai):
    """The key is written in the config (not an environment variable): a secret of the config."""
    cfg = write(tmp_path / "c.yaml", "prompts: ['Q {{n}}']\nproviders: [{id: 'openai:chat:m1', config: {apiBaseUrl: "
                f"'{{{{ env.FAKE_OPENAI_URL }}}}', apiKey: {KEY}}}}}]\ntests: [{{vars: {{n: '1'}}}}]\n")
    outputs = {}
    for mode in ("stored", "no-write"):
        fake_openai.enqueue_fault(400, body={"error": {"message": f"Incorrect API key provided: {KEY}.",
                                                       "type": "invalid_request_error"}})
        args = ["--no-write"] if mode == "no-write" else []
        result = cli("eval", "-c", cfg, "--no-progress-bar", "--no-cache", *args, "-o", tmp_path / f"{mode}.json")
        assert "Incorrect API key provided" in result.output, result.output
        outputs[mode] = result.output
        assert KEY not in result.output and "[redacted]" in result.output, result.output
        assert KEY not in (tmp_path / f"{mode}.json").read_text()


def test_a_secret_rendered_into_a_prompt_is_redacted_in_headers_and_labels(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    cfg = write(tmp_path / "c.yaml", "prompts: ['Key {{ env.OPENAI_API_KEY }} for {{w}}', 'Plain {{w}}']\n"
                "providers: [echo]\ntests: [{vars: {w: a}, assert: [{type: contains, value: a, metric: m}]}]\n")
    for args in ((), ("--no-write",)):
        result = cli("eval", "-c", cfg, "--no-progress-bar", *args)
        assert result.exit_code == 0, result.output
        assert KEY not in result.output and "Key ${OPENAI_API_KEY} for" in result.output, result.output
    for args in (("view",), ("show", "latest"), ("show", "latest", "0"), ("list",), ("diff", "latest", "latest")):
        result = cli(*args)
        assert KEY not in result.output, (args, result.output)


def test_a_db_password_is_scrubbed_like_factcli_dbs(pg_cluster, pg_url, tmp_path):
    password = pg_cluster.password
    cfg = write(tmp_path / "c.yaml", "prompts: ['Say {{w}}']\nproviders: [echo]\n"
                f"tests: [{{vars: {{w: 'pw {password}'}}, assert: [{{type: contains, value: pw}}]}}]\n")
    out = tmp_path / "out.json"
    result = cli("eval", "-c", cfg, "--db", pg_url, "--no-progress-bar", "-o", out)
    assert result.exit_code == 0, result.output
    assert password not in result.output and "pw ***" in result.output
    assert password not in out.read_text()
    assert password.encode() not in pg_cluster.pg_dump(pg_url)
    shown = cli("show", "latest", "0", "--db", pg_url)
    assert password not in shown.output and "pw ***" in shown.output


def test_the_response_cache_is_this_users_alone(tmp_path, fake_openai, isolated_home, monkeypatch):
    fake_openai.add_rule(".*", "x" * 70_000)  # a reply large enough for a file of its own
    cfg = write(tmp_path / "c.yaml", "prompts: ['Q {{n}}']\nproviders: [{id: 'openai:chat:m1', config: {apiBaseUrl: "
                "'{{ env.FAKE_OPENAI_URL }}'}}]\ntests: [{vars: {n: '1'}}, {vars: {n: '2'}}]\n")
    monkeypatch.setenv("OPENAI_API_KEY", "dummy-key")
    assert cli("eval", "-c", cfg, "--no-progress-bar", "--no-table").exit_code == 0
    cache = isolated_home / "cache"
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert any(p.suffix == ".val" for p in files) and any(p.name == "cache.db" for p in files)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) & 0o077 == 0, (p, oct(p.stat().st_mode))
