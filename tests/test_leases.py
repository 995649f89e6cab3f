"""Leases on this machine (issue 48): a heartbeat older than the lease timeout frees a run whatever its
pid says, a zombie or a pid reused by another process holds nothing, and the refusal says exactly
when the run can be taken over. Real processes: a zombie child, a `sleep` started after the lease's
last heartbeat, pid 1 (alive, started before any heartbeat)."""

import json
import os
import re
import socket
import subprocess
import time
from datetime import datetime, timedelta, timezone

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.errors import FactcliError
from factcli.store import clock, leases
from factcli.store.database import Store, holder_alive, now, seconds_since

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [*map(str, args)])


def _iso(seconds_ago: float) -> str:
    return (datetime.now(timezone.utc) - timedelta(seconds=seconds_ago)).isoformat(timespec="milliseconds")


@pytest.fixture
def stored_run(tmp_path):
    """A run of 3 rows with its last row missing, stored as `started` (its process gone): (db, run id)."""
    cfg = write(tmp_path / "c.yaml", "prompts: ['Say {{w}}']\nproviders: [echo]\ntests:\n"
                + "".join(f"  - vars: {{w: '{i}'}}\n" for i in range(3)))
    db = tmp_path / "runs.db"
    assert cli("eval", "-c", cfg, "--db", db, "--no-progress-bar", "--no-table").exit_code == 0
    with Store.open(db) as store:
        run = store.resolve("latest")
        store.execute("DELETE FROM results WHERE run_id = ? AND test_idx = 2", (run["id"],))
        store.commit()
    return db, run["id"]


def _hold(db, run_id, pid, seconds_ago):
    with Store.open(db) as store:
        store.update_run(run_id, {"status": "started", "finished_at": None, "host": socket.gethostname(), "pid": pid,
                                  "updated_at": _iso(seconds_ago)})
        return store.resolve(run_id)


def _state(pid) -> str:
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    return text[text.rfind(")") + 2]


def test_a_zombie_holds_nothing(stored_run):
    db, run_id = stored_run
    pid = os.fork()
    if pid == 0:  # the child exits at once; not reaped until the end of the test, it stays a zombie
        os._exit(0)
    try:
        deadline = time.time() + 10
        while _state(pid) != "Z" and time.time() < deadline:
            time.sleep(0.01)
        assert _state(pid) == "Z"
        os.kill(pid, 0)  # what the lease asked before: "alive"
        run = _hold(db, run_id, pid, seconds_ago=1)  # a heartbeat a second old: only the pid could hold it
        assert not holder_alive(run)
        assert json.loads(cli("list", "--json", "--db", db).output)[0]["status"] == "interrupted"
        taken = cli("eval", "--resume", run_id, "--db", db, "--no-progress-bar", "--no-table")
        assert taken.exit_code == 0 and "2 of 3 rows kept" in taken.output, taken.output
    finally:
        os.waitpid(pid, 0)


def test_a_pid_reused_by_another_process_holds_nothing(stored_run):
    db, run_id = stored_run
    run = _hold(db, run_id, 0, seconds_ago=10)  # the holder's last heartbeat, 10 s ago; then it died
    other = subprocess.Popen(["sleep", "60"])  # a process that is not factcli, started since, gets a pid
    try:
        run = _hold(db, run_id, other.pid, seconds_ago=10)  # as if the dead holder's pid were now `sleep`'s
        assert not holder_alive(run)
        taken = cli("eval", "--resume", run_id, "--db", db, "--no-progress-bar", "--no-table")
        assert taken.exit_code == 0 and "2 of 3 rows kept" in taken.output, taken.output
    finally:
        other.kill()
        other.wait()


def test_a_heartbeat_older_than_the_window_frees_the_run_whatever_the_pid_says(stored_run, monkeypatch):
    """pid 1 is alive and started before any heartbeat: it holds the run while the heartbeat is fresh,
    and the refusal says when it can be taken over; once the heartbeat is older than the window, not."""
    monkeypatch.setenv("FACTCLI_LEASE_TIMEOUT", "20")
    db, run_id = stored_run
    run = _hold(db, run_id, 1, seconds_ago=5)
    assert holder_alive(run)
    refused = cli("eval", "--resume", run_id, "--db", db, "--no-progress-bar")
    line = refused.output.strip()
    assert refused.exit_code == 1 and len(line.splitlines()) == 1, refused.output
    m = re.search(r"it can be taken over at (\d\d):(\d\d):(\d\d) UTC \(in (\d+) s\) if no heartbeat comes before", line)
    assert m and 13 <= int(m.group(4)) <= 15, line  # 20 s after a heartbeat 5 s old
    at = datetime.now(timezone.utc) + timedelta(seconds=int(m.group(4)))
    assert abs((at.hour * 3600 + at.minute * 60 + at.second)
               - (int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3)))) % 86400 <= 2
    run = _hold(db, run_id, 1, seconds_ago=21)
    assert not holder_alive(run)
    taken = cli("eval", "--resume", run_id, "--db", db, "--no-progress-bar", "--no-table")
    assert taken.exit_code == 0 and "2 of 3 rows kept" in taken.output, taken.output


def _beats(db, run_id, n: int, deadline_s: float = 20.0) -> list[str]:
    """The run's `updated_at` each time it changed, until it changed `n` times."""
    seen = []
    with Store.open(db) as store:
        last = store.resolve(run_id)["updated_at"]
        deadline = time.monotonic() + deadline_s
        while len(seen) < n and time.monotonic() < deadline:
            time.sleep(0.01)
            at = store.resolve(run_id)["updated_at"]
            if at != last:
                seen.append(at)
                last = at
    return seen


def test_a_run_in_sqlite_beats_too(tmp_path, monkeypatch):
    """A pid alone never holds a run, so a SQLite run's holder refreshes its heartbeat as a shared store's
    does: every timeout/6 (60 s: every 10 s on the store's clock, run 50 times fast here)."""
    monkeypatch.setattr(clock, "speed", 50.0)
    db = tmp_path / "runs.db"
    with Store.open(db, create=True) as store:
        store.insert_run({"id": "eval-x-abc123", "created_at": now(), "status": "started", "pid": os.getpid(),
                          "host": socket.gethostname(), "updated_at": now()})
        before = store.resolve("eval-x-abc123")["updated_at"]
        beat = leases.heartbeat(store, "eval-x-abc123")
    try:
        beats = _beats(db, "eval-x-abc123", 2)
    finally:
        beat.stop()
    assert len(beats) == 2 and before < beats[0] < beats[1]
    gap = (datetime.fromisoformat(beats[1]) - datetime.fromisoformat(beats[0])).total_seconds()
    assert 9.0 <= gap < 40.0, gap  # 10 s apart on the store's clock (+ a loaded machine's delay), well inside 60
    with Store.open(db) as store:
        with pytest.raises(FactcliError, match="can be taken over at"):
            leases.take(store, {**store.resolve("eval-x-abc123"), "pid": 1})


def test_a_held_run_is_free_once_its_heartbeat_stops_for_the_timeout(tmp_path, monkeypatch):
    """Held by a live process (pid 1) on this machine: while the heartbeat goes on, the run stays held
    past the lease timeout; once it stops, the run is free when the last beat is a timeout old, not
    before. Real heartbeats on the store's clock, run 50 times fast (60 s: 1.2 s here)."""
    monkeypatch.setattr(clock, "speed", 50.0)
    db = tmp_path / "runs.db"
    with Store.open(db, create=True) as store:
        store.insert_run({"id": "eval-x-abc123", "created_at": now(), "status": "started", "pid": 1,
                          "host": socket.gethostname(), "updated_at": now()})
    beat = leases.Heartbeat(db, "eval-x-abc123")
    beat.pid = 1  # beats as pid 1, which holds it (the heartbeat writes only its own holder's row)
    beat.start()
    try:
        started = clock.time_now()
        with Store.open(db) as store:
            while clock.time_now() - started < 75:  # 1.25 timeouts on the store's clock
                assert holder_alive(store.resolve("eval-x-abc123"))
                time.sleep(0.02)
    finally:
        beat.stop()
    with Store.open(db) as store:
        last = store.resolve("eval-x-abc123")
        assert holder_alive(last)
        with pytest.raises(FactcliError, match="can be taken over at"):
            leases.take(store, last)
        while holder_alive(store.resolve("eval-x-abc123")):
            time.sleep(0.02)
        freed = seconds_since(last["updated_at"])
        assert 60 <= freed <= 90, freed  # a timeout after the last beat, not before (+ the polling, a loaded machine)
        assert leases.take(store, store.resolve("eval-x-abc123"))["pid"] == os.getpid()
