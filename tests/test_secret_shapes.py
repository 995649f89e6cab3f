"""Secrets by value, not only by key (issue 48 item 3; the rule is store/redact.py's `_SHAPES`): each
known key shape, a URL's userinfo password, a `?key=` value and a secret-named env var's value are
scrubbed from the store, the screen (table, `show`, errors) and the exports (-o, `factcli export`),
while hashes, run ids and ordinary words stay as they are."""

import sqlite3

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.store.redact import scrub_shapes, scrub_text

runner = CliRunner()

SHAPES = {
    "openai": ("sk-abcdefghijklmnopqrstuvwxyz0123456789", "sk-[redacted]"),
    "anthropic": ("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx_yz-0123", "sk-ant-[redacted]"),
    "openai-project": ("sk-proj-AbCdEfGhIjKlMnOpQrStUvWxyz0123456789", "sk-proj-[redacted]"),
    "github": ("ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef1234", "ghp_[redacted]"),
    "slack": ("xoxb-1234567890-0987654321-AbCdEfGhIjKl", "xoxb-[redacted]"),
    "aws": ("AKIAIOSFODNN7EXAMPLE", "AKIA[redacted]"),
    "jwt": ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "[redacted]"),
    "long-token": ("Zx8Qm2Lk9Vb7Nc4Xd1Fg6Hj3Ks5Pa0WqRt", "[redacted]"),
}
# (what the secret is, the text holding it, what must not be seen, what is seen instead)
URLS = {
    "userinfo": ("postgres://bob:Hunter2Secret@db.example.com/app", "Hunter2Secret",
                 "postgres://bob:[redacted]@db.example.com/app"),
    "raw-at-userinfo": ("postgresql://bob:p@ss-W0rd-tail@db.example.com/app", "ss-W0rd-tail",
                        "postgresql://bob:[redacted]@db.example.com/app"),
    "query-key": ("https://api.example.com/v1?key=AIzaQuerySecret42&x=1", "AIzaQuerySecret42",
                  "https://api.example.com/v1?key=[redacted]&x=1"),
    "query-token": ("https://api.example.com/v1?x=1&token=tokQuerySecret42", "tokQuerySecret42",
                    "https://api.example.com/v1?x=1&token=[redacted]"),
}
CASES = {**{k: (v[0], v[0], v[1]) for k, v in SHAPES.items()}, **URLS}


def cli(*args):
    return runner.invoke(app, [*map(str, args)], env={"COLUMNS": "250"})


@pytest.mark.parametrize("name", CASES)
def test_each_shape_is_scrubbed_alone(name):
    text, secret, seen = CASES[name]
    assert secret not in scrub_shapes(f"see {text} here") and f"see {seen} here" == scrub_shapes(f"see {text} here")


def test_what_the_user_needs_is_left_as_it_is():
    for text in ("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",  # a sha256
                 "eval-20261124T193000-9a84d9", "results-eval-20261124T193000-9a84d9.json",  # run ids
                 "123e4567-e89b-12d3-a456-426614174000", "getUserAccountInformationFromDb2",  # a uuid, a name
                 "THE_CONSTANT_NAME_IS_VERY_LONG_INDEED_123", "task-abcdefghijklmnopqrstuvwxyz",
                 "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgA"
                 "AAABJRU5ErkJggg==", "ssh://git@github.com/org/repo", "https://example.com/search?q=keys&page=2",
                 "max_tokens: 512, the key is: 42"):
        assert scrub_shapes(text) == text, text


@pytest.mark.parametrize("name", CASES)
def test_each_shape_is_scrubbed_from_store_screen_and_exports(name, tmp_path, isolated_home):
    text, secret, seen = CASES[name]
    cfg = write(tmp_path / "c.yaml", "prompts: ['Use {{s}} now']\nproviders: [echo]\n"
                f"tests: [{{vars: {{s: '{text}'}}, assert: [{{type: contains, value: now}}]}}]\n")
    result = cli("eval", "-c", cfg, "--no-progress-bar", "-o", tmp_path / "out.json", "-o", tmp_path / "out.csv")
    assert result.exit_code == 0, result.output
    assert secret not in result.output and seen in result.output, result.output  # the table
    for out in ("out.json", "out.csv"):
        body = (tmp_path / out).read_text()
        assert secret not in body and seen in body, out
    for args in (("show", "latest", "0"), ("show", "latest"), ("view", "latest")):
        shown = cli(*args)
        assert shown.exit_code == 0 and secret not in shown.output, (args, shown.output)
    exported = cli("export", "latest", "-o", tmp_path / "export.jsonl")
    assert exported.exit_code == 0 and secret not in (tmp_path / "export.jsonl").read_text()
    with sqlite3.connect(isolated_home / "factcli.db") as db:
        db.execute("PRAGMA wal_checkpoint(FULL)")
    stored = b"".join(p.read_bytes() for p in isolated_home.glob("factcli.db*"))
    assert secret.encode() not in stored and seen.encode() in stored


def test_a_secret_named_env_var_and_the_configs_env_are_scrubbed(tmp_path, isolated_home, monkeypatch):
    """`env: {DATABASE_URL: …}` kept its password, `GH_PAT`/`token:` their values: by key name and by value."""
    monkeypatch.setenv("SERVICE_CREDENTIALS", "plain-words-but-secret")
    cfg = write(tmp_path / "c.yaml", "env: {DATABASE_URL: 'postgres://app:EnvPassw0rd@db/x', GH_PAT: patvalue99}\n"
                "prompts: ['{{ env.SERVICE_CREDENTIALS }} {{q}}']\nproviders: [{id: echo, config: {token: tokvalue77}}]\n"
                "tests: [{vars: {q: hi}}]\n")
    result = cli("eval", "-c", cfg, "--no-progress-bar", "-o", tmp_path / "out.json")
    assert result.exit_code == 0, result.output
    with sqlite3.connect(isolated_home / "factcli.db") as db:
        db.execute("PRAGMA wal_checkpoint(FULL)")
    stored = b"".join(p.read_bytes() for p in isolated_home.glob("factcli.db*"))
    for secret in ("EnvPassw0rd", "patvalue99", "tokvalue77", "plain-words-but-secret"):
        assert secret.encode() not in stored, secret
        assert secret not in (tmp_path / "out.json").read_text() and secret not in result.output, secret
    assert "${SERVICE_CREDENTIALS}" in result.output


def test_a_key_quoted_in_a_provider_error_is_scrubbed_by_its_shape(tmp_path, fake_openai):
    key = SHAPES["anthropic"][0]
    fake_openai.enqueue_fault(400, body={"error": {"message": f"Incorrect API key {key} for "
                                                   "https://x.example/v1?key=AIzaErrSecret9", "type": "invalid"}})
    cfg = write(tmp_path / "c.yaml", "prompts: ['Q']\nproviders: [{id: 'openai:chat:m1', config: {apiBaseUrl: "
                "'{{ env.FAKE_OPENAI_URL }}', apiKey: dummy-key}}]\ntests: [{vars: {n: '1'}}]\n")
    result = cli("eval", "-c", cfg, "--no-progress-bar", "--no-cache", "-o", tmp_path / "o.json")
    assert "Incorrect API key" in result.output
    for secret in (key, "AIzaErrSecret9"):
        assert secret not in result.output and secret not in (tmp_path / "o.json").read_text()


@pytest.mark.parametrize("value, message", [
    ("[sk-a, sk-b]", "expected the API key as a string, got list"),
    ("{k: sk-a}", "expected the API key as a string, got dict"),
])
def test_an_api_key_is_one_string(tmp_path, value, message):
    cfg = write(tmp_path / "c.yaml", f"prompts: ['Q']\nproviders: [{{id: 'openai:chat:m1', config: {{apiKey: {value}}}}}]\n"
                "tests: [{vars: {n: '1'}}]\n")
    result = cli("eval", "-c", cfg, "--no-progress-bar")
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and message in lines[0] and "apiKey" in lines[0], result.output
    assert "sk-a" not in result.output


def test_a_graders_api_key_is_one_string_too(tmp_path):
    cfg = write(tmp_path / "c.yaml", "prompts: ['Q']\nproviders: [echo]\ntests: [{assert: [{type: llm-rubric, value: ok, "
                "provider: {id: 'openai:chat:j', config: {apiKey: [sk-aaa, sk-bbb]}}}]}]\n")
    result = cli("eval", "-c", cfg, "--no-progress-bar")
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and "apiKey must be one string, got list" in lines[0], result.output


def test_userinfo_in_an_endpoint_is_one_clear_error_never_a_crash(tmp_path, fake_openai, monkeypatch):
    url = fake_openai.url.replace("http://", "http://user:UserInfoPw1@")
    cfg = write(tmp_path / "c.yaml", f"prompts: ['Q']\nproviders: [{{id: 'openai:chat:m1', config: {{apiBaseUrl: "
                f"'{url}', apiKey: dummy-key}}}}]\ntests: [{{vars: {{n: '1'}}}}]\n")
    result = cli("eval", "-c", cfg, "--no-progress-bar")
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert "apiBaseUrl" in lines[0] and "user name or password" in lines[0] and "UserInfoPw1" not in result.output
    assert "Traceback" not in result.output and "AUTHORIZATION" not in result.output
    # the same URL from OPENAI_BASE_URL: the preflight says so before any call
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", "dummy-key")
    cfg = write(tmp_path / "d.yaml", "prompts: ['Q']\nproviders: ['openai:chat:m1']\ntests: [{vars: {n: '1'}}]\n")
    result = cli("eval", "-c", cfg, "--no-progress-bar")
    assert result.exit_code == 1 and "user name or password" in result.output and "UserInfoPw1" not in result.output
    assert "Traceback" not in result.output and len(fake_openai.requests) == 0


def test_a_raw_at_in_a_db_password_shows_no_tail():
    from factcli.store.base import redact

    from psycopg.conninfo import conninfo_to_dict

    from factcli.store.postgres_backend import _userinfo_at_escaped

    sent = conninfo_to_dict(_userinfo_at_escaped("postgresql://bob:p@ss@w0rd@db.example.com:5432/app?sslmode=off"))
    assert (sent["user"], sent["password"], sent["host"], sent["dbname"]) == ("bob", "p@ss@w0rd", "db.example.com", "app")
    result = cli("list", "--db", "postgresql://bob:p@ssTailW0rd@127.0.0.1:9/x")  # nothing listens on port 9
    assert result.exit_code == 1 and "ssTailW0rd" not in result.output and "bob:***@127.0.0.1" in result.output, \
        result.output

    assert redact("postgresql://bob:p@ss@w0rd@db.example.com:5432/app") == "postgresql://bob:***@db.example.com:5432/app"
    assert scrub_text("postgresql://bob:p@ss@w0rd@db.example.com/app", {}) == "postgresql://bob:[redacted]@db.example.com/app"
