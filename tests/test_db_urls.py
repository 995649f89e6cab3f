"""`--db` and FACTCLI_DB given a URL (issue 39): PostgreSQL's spellings, SQLAlchemy's included, open the
server; any other URL is one error naming the supported ones (never a folder named after the URL), and
a password in it is never printed."""

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()
CONFIG = "prompts: ['Say {{w}}']\nproviders: [echo]\ntests: [{vars: {w: hi}, assert: [{type: contains, value: hi}]}]\n"


def cli(*args):
    return runner.invoke(app, [*map(str, args)])


@pytest.mark.parametrize("url", ["mysql://ann:s3cret-pw@db/evals", "sqlite:///runs.db", "https://ann:s3cret-pw@x/y",
                                 "postgresql+asyncpg://ann:s3cret-pw@db/evals", "file:///tmp/runs.db"])
def test_an_unsupported_url_is_one_error_naming_the_supported_ones(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = write(tmp_path / "c.yaml", CONFIG)
    for args in (("eval", "-c", cfg, "--db", url), ("list", "--db", url), ("view", "--db", url)):
        result = cli(*args)
        assert result.exit_code == 1, (args, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "not a supported store" in lines[0], result.output
        assert "postgresql://" in lines[0] and "postgresql+psycopg2://" in lines[0]
        assert "s3cret-pw" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]  # no folder named after the URL


def test_factcli_db_with_an_unsupported_url_is_the_same_error(tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_DB", "mysql://ann:s3cret-pw@db/evals")
    result = cli("list")
    assert result.exit_code == 1 and "not a supported store" in result.output and "s3cret-pw" not in result.output


@pytest.mark.parametrize("scheme", ["postgresql+psycopg", "postgresql+psycopg2", "postgres", "POSTGRESQL"])
def test_postgresql_spellings_open_the_server_and_hide_the_password(scheme, pg_cluster, pg_url, tmp_path):
    url = scheme + pg_url[len("postgresql"):]
    cfg = write(tmp_path / "c.yaml", CONFIG)
    result = cli("eval", "-c", cfg, "--db", url, "--no-progress-bar")
    assert result.exit_code == 0, result.output
    assert pg_cluster.password not in result.output
    assert f"--db '{scheme}://factcli_test:***@127.0.0.1" in result.output  # "View it: …"
    listed = cli("list", "--db", url)
    assert listed.exit_code == 0 and "Run" in listed.output or "eval-" in listed.output
    assert pg_cluster.password not in listed.output
    assert not any(p.is_dir() for p in tmp_path.iterdir())
