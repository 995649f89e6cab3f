"""A team's runs in one PostgreSQL: many processes writing at once, a run killed on one FACTCLI_HOME and
resumed from another without its config files, leases (a second resumer refused, a dead machine's run
taken over), and the database password in no stored byte and no message."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.errors import FactcliError
from factcli.store import leases
from factcli.store.database import Store, shown_status

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [*map(str, args)])


def _env(home, **extra) -> dict:
    env = {**os.environ, "FACTCLI_HOME": str(home), **extra}
    env.pop("FACTCLI_DB", None)
    return env


def _count(url, sql="SELECT COUNT(*) FROM results", params=()) -> int:
    try:
        with Store.open(url) as store:
            return store.execute(sql, params).fetchone()[0]
    except FactcliError:
        return 0


def test_six_processes_write_at_once(pg_url, tmp_path):
    rows = "\n".join(f"w{i}" for i in range(2000))
    write(tmp_path / "tests.csv", "word\n" + rows + "\n")
    cfg = write(tmp_path / "c.yaml", "prompts: ['Say {{word}}']\nproviders: [echo]\n"
                "defaultTest: {assert: [{type: contains, value: Say}]}\ntests: file://tests.csv\n")
    procs = [subprocess.Popen([sys.executable, "-m", "factcli", "eval", "-c", str(cfg), "--db", pg_url, "-j", "8",
                               "--no-progress-bar", "--no-table", "--description", f"writer {i}"],
                              env=_env(tmp_path / f"home{i}"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for i in range(6)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    with Store.open(pg_url) as store:
        runs = store.list_runs(10)
        assert len(runs) == 6 and {r["status"] for r in runs} == {"complete"}
        assert sorted(r["description"] for r in runs) == [f"writer {i}" for i in range(6)]
        assert all(r["rows_done"] == 2000 and r["successes"] == 2000 for r in runs)
        assert store.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 12_000
        assert store.execute("SELECT COUNT(*) FROM (SELECT DISTINCT run_id, test_idx, prompt_idx, repeat_idx "
                             "FROM results) AS k").fetchone()[0] == 12_000
        assert all(store.result_count(r["id"]) == 2000 for r in runs)


KILL_CONFIG = """
prompts: ["Q: {{n}}"]
providers: [{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
""" + "".join(f"  - vars: {{n: '{i}'}}\n    assert: [{{type: contains, value: 'Q: {i}'}}]\n" for i in range(40))


def test_killed_on_one_home_resumed_from_another_and_a_second_resumer_refused(pg_url, tmp_path, fake_openai,
                                                                               monkeypatch):
    fake_openai.latency = 0.05
    cfg_dir = tmp_path / "configs"
    cfg = write(cfg_dir / "c.yaml", KILL_CONFIG)
    first = subprocess.Popen([sys.executable, "-m", "factcli", "eval", "-c", str(cfg), "--db", pg_url, "-j", "2",
                              "--no-cache", "--no-progress-bar", "--no-table"], env=_env(tmp_path / "home-a"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and _count(pg_url) < 15:
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    time.sleep(0.3)  # what the dead process had in flight has reached the server
    with Store.open(pg_url) as store:
        run = store.resolve("latest")
        done = {r["test_idx"] for r in store.results(run["id"], fields="test_idx")}
    assert run["status"] == "started" and 15 <= len(done) < 40
    asked_before = fake_openai.request_count
    # asked but not stored: the calls in flight (-j 2) and the rows of the group not yet committed
    # (run/recording/writer.GROUP_S = 0.1 s of rows, ~4 at 0.05 s a call on two slots); those are asked again
    lost = asked_before - len(done)
    assert 0 <= lost <= 8, lost
    shutil.rmtree(cfg_dir)  # the other machine does not have the config files

    fake_openai.latency = 0.15
    resumer = subprocess.Popen([sys.executable, "-m", "factcli", "eval", "--resume", run["id"], "--db", pg_url,
                                "-j", "1", "--no-cache", "--no-progress-bar", "--no-table",
                                # (its config files are gone: the stored config, with its endpoint)
                                "--trust-stored-config"],
                               env=_env(tmp_path / "home-b"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and _count(pg_url, "SELECT pid FROM runs WHERE id = ?", (run["id"],)) != resumer.pid:
        time.sleep(0.02)
    monkeypatch.setenv("FACTCLI_HOME", str(tmp_path / "home-c"))
    second = cli("eval", "--resume", run["id"], "--db", pg_url, "--no-progress-bar", "--trust-stored-config")
    assert second.exit_code == 1, second.output
    line = second.output.strip()
    assert len(line.splitlines()) == 1 and f"is being run by pid {resumer.pid} on {socket.gethostname()}" in line
    out, err = resumer.communicate(timeout=120)
    assert resumer.returncode == 0, err.decode()
    assert "config files of run" in err.decode() and "using the config stored with the run" in err.decode()

    asked = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests[asked_before:]]
    assert len(asked) == 40 - len(done)  # only the rows that had not finished
    assert not set(asked) & {f"Q: {i}" for i in done}
    with Store.open(pg_url) as store:
        final = store.resolve(run["id"])
        assert final["status"] == "complete" and final["successes"] == 40 and final["attempts"] == 2
        keys = [(r["test_idx"], r["prompt_idx"], r["repeat_idx"]) for r in store.results(run["id"])]
        assert sorted(keys) == [(i, 0, 0) for i in range(40)]  # every row once


def _iso(seconds_ago: float) -> str:
    return (datetime.now(timezone.utc) - timedelta(seconds=seconds_ago)).isoformat(timespec="milliseconds")


def test_a_lease_from_another_machine_is_kept_while_it_beats_and_taken_over_when_it_stops(pg_url, monkeypatch):
    monkeypatch.setenv("FACTCLI_LEASE_TIMEOUT", "30")
    with Store.open(pg_url, create=True) as store:
        store.insert_run({"id": "eval-x-abc123", "created_at": _iso(100), "status": "started", "pid": 4242,
                          "host": "ci-runner-7", "updated_at": _iso(5)})
        run = store.resolve("eval-x-abc123")
        assert shown_status(run) == "running"
        with pytest.raises(FactcliError, match="being run by pid 4242 on ci-runner-7, last heartbeat 5 s ago"):
            leases.take(store, run)
        store.update_run(run["id"], {"updated_at": _iso(31)})  # the machine died half a minute ago
        run = store.resolve("eval-x-abc123")
        assert shown_status(run) == "interrupted"
        stale = dict(run)
        taken = leases.take(store, run)
        assert taken["host"] == socket.gethostname() and taken["pid"] == os.getpid()
        with pytest.raises(FactcliError, match="being run by pid"):  # what was read before is no longer so
            leases.take(store, stale)
    monkeypatch.setenv("FACTCLI_LEASE_TIMEOUT", "1.2")
    beat = leases.Heartbeat(pg_url, "eval-x-abc123").start()
    try:
        time.sleep(0.6)
    finally:
        beat.stop()
    with Store.open(pg_url) as store:
        assert store.resolve("eval-x-abc123")["updated_at"] > taken["updated_at"]


def test_the_password_is_in_no_stored_byte_and_no_message(pg_cluster, pg_url, tmp_path, fake_openai, isolated_home):
    password = pg_cluster.password
    cfg = write(tmp_path / "c.yaml", KILL_CONFIG.split("tests:")[0] + "tests:\n" + "".join(
        f"  - vars: {{n: '{i}'}}\n    assert: [{{type: contains, value: 'Q: 1'}}]\n" for i in range(3)))
    outputs = []
    formats = ("json", "jsonl", "yaml", "csv", "xml", "junit.xml", "html")
    result = cli("eval", "-c", cfg, "--db", pg_url, "--no-progress-bar", "-o", tmp_path / "eval.json")
    outputs.append(result.output)
    assert result.exit_code == 100 and "View it: factcli view" in result.output
    exports = [tmp_path / f"export.{f}" for f in formats]
    result = cli("export", "latest", "--db", pg_url, *[a for p in exports for a in ("-o", p)])
    assert result.exit_code == 0
    outputs.append(result.output)
    run_id = json.loads(cli("list", "--json", "--db", pg_url).output)[0]["id"]
    for args in (["view"], ["view", "--json"], ["show", run_id], ["show", run_id, "0"], ["list"],
                 ["diff", run_id, run_id], ["view", "nope"], ["copy", run_id, "--to", tmp_path / "c.db"],
                 ["copy", run_id, "--to", pg_url], ["eval", "--resume", run_id]):
        outputs.append(cli(*args, "--db", pg_url).output)
    wrong = pg_url.replace(password, password[::-1])
    outputs.append(cli("list", "--db", wrong).output)
    assert "password authentication failed" in outputs[-1] and "***" in outputs[-1]
    stored = [p for p in [*exports, tmp_path / "eval.json", tmp_path / "c.db", *isolated_home.rglob("*")]
              if p.is_file()]
    assert any("cache" in str(p) for p in stored)  # the response cache was written
    for p in stored:
        assert password.encode() not in p.read_bytes(), p
    dump = pg_cluster.pg_dump(pg_url)
    assert run_id.encode() in dump and password.encode() not in dump
    for text in outputs:
        assert password not in text and "Traceback" not in text


def test_resuming_elsewhere_names_a_code_file_that_is_missing_there(tmp_path, monkeypatch):
    cfg_dir = tmp_path / "configs"
    write(cfg_dir / "check.py", "def get_assert(output, context):\n    return True\n")
    cfg = write(cfg_dir / "c.yaml", "prompts: ['Say {{w}}']\nproviders: [echo]\ntests:\n"
                + "".join(f"  - vars: {{w: '{i}'}}\n    assert: [{{type: python, value: file://check.py}}]\n"
                          for i in range(3)))
    db = tmp_path / "runs.db"
    assert cli("eval", "-c", cfg, "--db", db, "--no-progress-bar", "--no-table").exit_code == 0
    with Store.open(db) as store:  # as if the machine had died after two rows
        run = store.resolve("latest")
        store.execute("DELETE FROM results WHERE run_id = ? AND test_idx = 2", (run["id"],))
        store.update_run(run["id"], {"status": "interrupted", "finished_at": None})
    shutil.rmtree(cfg_dir)
    result = cli("eval", "--resume", "latest", "--db", db, "--no-progress-bar", "--trust-stored-config")
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(lines) == 1 and "check.py" in lines[0], result.output
    assert "Traceback" not in result.output
    write(cfg_dir / "check.py", "def get_assert(output, context):\n    return True\n")  # there again: it resumes
    result = cli("eval", "--resume", "latest", "--db", db, "--no-progress-bar", "--no-table", "--trust-stored-config")
    assert result.exit_code == 0 and "2 of 3 rows kept" in result.output, result.output


def test_resume_of_a_run_another_machine_holds(tmp_path, monkeypatch):
    """Through the CLI: refused while the other machine's heartbeat is fresh, taken over once it is
    older than FACTCLI_LEASE_TIMEOUT."""
    monkeypatch.setenv("FACTCLI_LEASE_TIMEOUT", "20")
    cfg = write(tmp_path / "c.yaml", "prompts: ['Say {{w}}']\nproviders: [echo]\ntests:\n"
                + "".join(f"  - vars: {{w: '{i}'}}\n" for i in range(3)))
    db = tmp_path / "runs.db"
    assert cli("eval", "-c", cfg, "--db", db, "--no-progress-bar", "--no-table").exit_code == 0
    with Store.open(db) as store:
        run = store.resolve("latest")
        store.execute("DELETE FROM results WHERE run_id = ? AND test_idx = 2", (run["id"],))
        store.update_run(run["id"], {"status": "started", "finished_at": None, "host": "ci-runner-7", "pid": 99,
                                     "updated_at": _iso(3)})
    listed = json.loads(cli("list", "--json", "--db", db).output)
    assert listed[0]["status"] == "running"
    refused = cli("eval", "--resume", "latest", "--db", db, "--no-progress-bar")
    assert refused.exit_code == 1 and "is being run by pid 99 on ci-runner-7" in refused.output
    assert "can be taken over" in refused.output and len(refused.output.strip().splitlines()) == 1
    with Store.open(db) as store:
        store.update_run(run["id"], {"updated_at": _iso(21)})  # its machine went silent 21 s ago
    assert json.loads(cli("list", "--json", "--db", db).output)[0]["status"] == "interrupted"
    taken = cli("eval", "--resume", "latest", "--db", db, "--no-progress-bar", "--no-table")
    assert taken.exit_code == 0 and "2 of 3 rows kept" in taken.output, taken.output
    with Store.open(db) as store:
        final = store.resolve("latest")
        assert final["status"] == "complete" and final["host"] == socket.gethostname()
