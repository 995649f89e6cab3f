"""A store that goes away in the middle of a run (issue 39): a real throw-away PostgreSQL stopped with
`pg_ctl stop -m immediate` while an eval runs. Started again a moment later, every row is stored and
the exit code is the run's; kept down to the end, every row is in the -o file with true stats, the exit
code is 1 and a later --resume writes the rest without a model call (the response cache)."""

import json
import os
import subprocess
import sys
import time

from conftest import write

from factcli.errors import FactcliError
from factcli.store.database import Store

CONFIG = """
prompts: ["Q: {{n}}"]
providers: [{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
""" + "".join(f"  - vars: {{n: '{i}'}}\n    assert: [{{type: contains, value: 'Q: {i}'}}]\n" for i in range(100))


def _count(url) -> int:
    try:
        with Store.open(url) as store:
            return store.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except FactcliError:
        return 0


def _eval(tmp_path, url, timeout_s: str, *extra) -> subprocess.Popen:
    env = {**os.environ, "FACTCLI_STORE_TIMEOUT": timeout_s}
    env.pop("FACTCLI_DB", None)
    return subprocess.Popen([sys.executable, "-m", "factcli", "eval", "--db", url, "-j", "2", "--no-progress-bar",
                             "--no-table", *map(str, extra)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _halt_when_rows(cluster, url, n: int) -> None:
    deadline = time.time() + 60
    while time.time() < deadline and _count(url) < n:
        time.sleep(0.02)
    cluster.halt()


def _results(path) -> tuple[list, dict]:
    doc = json.loads(path.read_text())
    return doc["results"]["results"], doc["results"]["stats"]


def test_a_server_stopped_mid_run_and_started_again_gets_every_row(pg_cluster, pg_url, tmp_path, fake_openai):
    fake_openai.latency = 0.08  # 100 rows on two slots: ~4 s
    cfg = write(tmp_path / "c.yaml", CONFIG)
    out = tmp_path / "out.json"
    proc = _eval(tmp_path, pg_url, "60", "-c", cfg, "-o", out)
    try:
        _halt_when_rows(pg_cluster, pg_url, 20)
        time.sleep(1.5)
    finally:
        pg_cluster.restart()
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stdout + stderr
    assert "trying again for up to 60 s" in stderr and "rows held meanwhile are stored" in stderr, stderr
    assert "Traceback" not in stderr + stdout
    assert "error ignored terminating" not in stderr  # psycopg's log line on a broken pipeline (issue 48)
    with Store.open(pg_url) as store:
        run = store.resolve("latest")
        keys = sorted((r["test_idx"], r["prompt_idx"]) for r in store.results(run["id"]))
    assert (run["status"], run["rows_done"], run["successes"]) == ("complete", 100, 100)
    assert keys == [(i, 0) for i in range(100)]
    rows, stats = _results(out)
    assert len(rows) == 100 and stats["successes"] == 100


def test_a_server_down_to_the_end_keeps_every_row_and_resume_writes_them_free(pg_cluster, pg_url, tmp_path,
                                                                             fake_openai):
    fake_openai.latency = 0.05
    cfg = write(tmp_path / "c.yaml", CONFIG)
    out = tmp_path / "out.json"
    proc = _eval(tmp_path, pg_url, "2", "-c", cfg, "-o", out)
    try:
        _halt_when_rows(pg_cluster, pg_url, 20)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        pg_cluster.restart()
    assert proc.returncode == 1, stdout + stderr  # the store failed (docs/commands.md, exit codes)
    assert "Traceback" not in stderr + stdout and pg_cluster.password not in stderr + stdout
    rows, stats = _results(out)
    assert sorted(r["testIdx"] for r in rows) == list(range(100))
    assert (stats["successes"], stats["failures"], stats["errors"]) == (100, 0, 0)
    stored = _count(pg_url)
    assert 20 <= stored < 100
    line = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert len(line) == 1 and f"did not take {100 - stored} of this run's 100 rows" in line[0], stderr
    assert "error ignored terminating" not in stderr
    # --no-table: no "table above"; the -o file is named; the cache will answer the resume
    assert "table above" not in line[0] and "Every row is in the -o files" in line[0]
    assert "come from the response cache" in line[0]
    run_id = json.loads(out.read_text())["factcli"]["runId"]
    assert f"factcli eval --resume {run_id} --db 'postgresql://factcli_test:***@" in line[0]

    asked = fake_openai.request_count
    out.unlink()
    again = _eval(tmp_path, pg_url, "2", "--resume", run_id, "-o", out)  # (-o again: the store's list is not trusted)
    stdout, stderr = again.communicate(timeout=120)
    assert again.returncode == 0, stdout + stderr
    assert fake_openai.request_count == asked  # every reply from the response cache
    with Store.open(pg_url) as store:
        run = store.resolve(run_id)
        keys = sorted(r["test_idx"] for r in store.results(run_id))
    assert (run["status"], run["rows_done"], run["successes"]) == ("complete", 100, 100)
    assert keys == list(range(100))
    rows, stats = _results(out)  # the run's -o file, written again by the resume
    assert len(rows) == 100 and stats["successes"] == 100


def test_the_outage_message_says_what_this_runs_options_make_true():
    """--no-cache: no cached reply to promise; --no-table and no -o: no table or file to point at."""
    from types import SimpleNamespace

    from factcli.cli import eval_cmd

    lines = []

    class Console:
        def print(self, text, **_):
            lines.append(text)

    import factcli.report.summary as summary

    real = summary.stderr_console
    summary.stderr_console = lambda: Console()
    try:
        run = SimpleNamespace(run_id="eval-x-abc123", total_steps=10, cache=False)
        options = SimpleNamespace(db=None, table=False, outputs=[])
        assert eval_cmd._unstored(run, (3, "tests 1, 2, 3", "gone"), options) == 1
        run.cache, options.table, options.outputs = True, True, ["out.json"]
        eval_cmd._unstored(run, (3, "tests 1, 2, 3", "gone"), options)
    finally:
        summary.stderr_console = real
    assert "--no-cache kept no reply, so their models are called again" in lines[0]
    assert "response cache" not in lines[0] and "table above" not in lines[0]
    assert "The rows are in no table or file (--no-table, no -o)" in lines[0]
    assert "Every row is in the table above and the -o files" in lines[1] and "from the response cache" in lines[1]


def test_a_row_the_store_cannot_take_is_reported_and_its_neighbours_stored(tmp_path, monkeypatch):
    """`string or blob too big` is the row's, not the store's: no outage (no minute of retries), the
    row named, every other row stored."""
    import sqlite3

    from typer.testing import CliRunner

    from factcli.cli import app

    real_connect = sqlite3.connect

    def connect(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 200_000)  # a value over 200 KB is `string or blob too big`
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    monkeypatch.setenv("FACTCLI_STORE_TIMEOUT", "30")
    write(tmp_path / "big.txt", "x" * 300_000)  # read when the config loads: the stored config names the file
    cfg = write(tmp_path / "c.yaml", "prompts: ['{{w}}']\nproviders: [echo]\ntests:\n" + "".join(
        f"  - vars: {{w: '{'file://big.txt' if i == 3 else f'row {i}'}'}}\n" for i in range(8)))
    db = tmp_path / "runs.db"
    started = time.monotonic()
    result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "--db", str(db), "--no-progress-bar", "--no-table"])
    assert time.monotonic() - started < 20  # not 30 s of an outage's retries
    assert "trying again" not in result.output and "Traceback" not in result.output, result.output
    assert "cannot store the row of test 3 (prompt 0, repeat 0): string or blob too big" in result.output
    monkeypatch.setattr(sqlite3, "connect", real_connect)
    with Store.open(db) as store:
        run = store.resolve("latest")
        keys = sorted(r["test_idx"] for r in store.results(run["id"]))
    # the store lacks a row: the run is not complete there, and the eval says so (exit 1)
    assert keys == [0, 1, 2, 4, 5, 6, 7] and run["status"] == "interrupted"
    assert result.exit_code == 1 and "error: the store refused 1 row (test 3 (prompt 0, repeat 0))" in result.output
