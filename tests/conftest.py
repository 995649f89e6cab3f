import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_openai import FakeOpenAI  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# Variables that would let a test reach a real service or the user's own settings.
_LEAKY = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_API_KEY", "OLLAMA_BASE_URL",
          "FACTCLI_GRADER", "FACTCLI_PASS_RATE_THRESHOLD", "FACTCLI_FAILED_TEST_EXIT_CODE",
          "FACTCLI_MAX_CONCURRENCY", "FACTCLI_DEBUG")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """No test touches the real ~/.factcli or a real API key; retries back off in milliseconds."""
    home = tmp_path / "factcli-home"
    monkeypatch.setenv("FACTCLI_HOME", str(home))
    for name in _LEAKY:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FACTCLI_BACKOFF_MS", "5")
    monkeypatch.setenv("FACTCLI_STORE_TIMEOUT", "0.5")  # a store that fails for good: given up on at once
    from factcli.store import redact

    monkeypatch.setattr(redact, "_NOTED", {})  # the --db passwords an earlier test's commands noted
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return home


@pytest.fixture(scope="session")
def _server():
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def fake_openai(_server, monkeypatch):
    """The session's OpenAI-compatible server, reset for this test; FAKE_OPENAI_URL points at it."""
    _server.reset()
    _server.clear_rules()
    _server.latency = 0
    _server.set_fault_rate(0)
    _server.set_rate_limit(None)
    _server.send_usage = True
    _server.cached_tokens = 0
    _server.refuse_response_format()
    monkeypatch.setenv("FAKE_OPENAI_URL", _server.url)
    yield _server
    _server.reset()
    _server.clear_rules()


def _node_strips_types() -> bool:
    import shutil
    import subprocess

    if shutil.which("node") is None:
        return False
    probe = subprocess.run(["node", "-p", "Boolean(process.features.typescript)"], capture_output=True, text=True)
    return probe.stdout.strip() == "true"


# A TypeScript file with no way to run (Node without type stripping, no typescript package near it)
TS_REFUSED = "is TypeScript: it runs with Node.js 22.6 or later"
ts_refused = pytest.mark.skipif(__import__("shutil").which("node") is None or _node_strips_types(),
                                reason="needs a Node.js without type stripping (this one runs TypeScript)")


def ctrl_c_as_in_a_terminal() -> None:
    """Popen's preexec_fn for a test that presses Ctrl-C: a shell starts a background job (`pytest &`)
    with SIGINT ignored, children inherit that, and Python then never raises KeyboardInterrupt."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def many_echo_tests(n: int) -> str:
    """A config of n tests through echo; every third fails, descriptions on some, a metric on all."""
    tests = "".join(f"  - vars: {{q: 'q{i}'{', extra: x' if i % 7 == 0 else ''}}}\n"
                    + (f"    description: test {i}\n" if i % 5 == 0 else "")
                    + ("    assert: [{type: contains, value: nope, metric: m}]\n" if i % 3 == 0 else "")
                    for i in range(n))
    return ("prompts: ['Answer {{q}}', 'Reply {{q}}']\nproviders: [echo]\n"
            "defaultTest: {assert: [{type: icontains, value: answer, metric: m}]}\ntests:\n" + tests)


def result_rows(out: Path) -> list:
    """The rows of an -o results.json without what differs between any two runs of the same config."""
    import json

    rows = json.loads(out.read_text())["results"]["results"]
    for r in rows:
        r.pop("id", None)
        r.pop("latencyMs", None)
        r["response"].pop("latencyMs", None)
    return rows


@pytest.fixture
def remote_prices(monkeypatch):
    """The fake server stands for a vendor's endpoint: its loopback address does not make a model local
    (free), so a model litellm's price table does not list has no price."""
    monkeypatch.setattr("factcli.providers.pricing.is_local_url", lambda url: False)


_EXCERPT = __import__("re").compile(r"^  [> ] *\d* \|( |$)")


def without_excerpt(lines: list[str]) -> list[str]:
    """An error's lines without the excerpt of the input printed below it (a YAML syntax error's
    numbered lines and caret): what is left must still be one line."""
    return [ln for ln in lines if not _EXCERPT.match(ln)]


# ---------------------------------------------------------------- PostgreSQL (tests/pg_cluster.py)


@pytest.fixture(scope="session")
def pg_cluster():
    """One throw-away PostgreSQL cluster for the whole session; the tests that need it skip, saying
    why, only when it cannot be started."""
    from pg_cluster import PgCluster

    cluster = PgCluster()
    reason = cluster.start()
    if reason is not None:
        cluster.stop()
        pytest.skip(f"PostgreSQL tests skipped: {reason}")
    yield cluster
    cluster.stop()


@pytest.fixture
def pg_url(pg_cluster) -> str:
    """A fresh, empty database of the session's cluster, as a URL with its password."""
    return pg_cluster.new_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_target(request, tmp_path) -> str:
    """The same test on both backends: a SQLite file, then a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    return request.getfixturevalue("pg_url")
