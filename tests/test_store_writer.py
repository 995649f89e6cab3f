"""store/writer.py: a big SQLite run's rows written by a second process.

The protocol is driven directly (groups, a failing group, a dead child, a group cut short), then
through the CLI: the same stored rows and -o file as a run writing them itself, a store failure,
a single core, and, in subprocesses, `kill -9` of the eval and Ctrl-C in its terminal.
"""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ctrl_c_as_in_a_terminal, many_echo_tests, result_rows, write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.run import session
from factcli.store import writer as writer_mod
from factcli.store.database import Store
from factcli.store.schema import RESULT_FIELDS, upsert_sql
from factcli.store.writer import RowWriter, WriterError

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def fresh_store(path: Path, run_id: str = "r1") -> None:
    with Store.open(path, create=True) as store:
        store.insert_run({"id": run_id, "created_at": "2026-11-26T00:00:00", "status": "started"})


def rows(run_id: str, start: int, n: int) -> list[tuple]:
    """Result tuples in RESULT_FIELDS order: test_idx start..start+n-1, every other field plain."""
    base = dict.fromkeys(RESULT_FIELDS)
    out = []
    for i in range(start, start + n):
        row = {**base, "run_id": run_id, "test_idx": i, "prompt_idx": 0, "repeat_idx": 0, "seq": i + 1,
               "success": 1, "score": 1.0, "output": f"out {i}", "grading_json": '{"pass": true}'}
        out.append(tuple(row[f] for f in RESULT_FIELDS))
    return out


def stored(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT test_idx, output FROM results ORDER BY test_idx").fetchall()


# ---------------------------------------------------------------- the protocol


def test_groups_are_committed_by_the_child_and_sync_waits_for_them(tmp_path):
    db = tmp_path / "f.db"
    fresh_store(db)
    w = RowWriter(db, upsert_sql(), 10_000)
    try:
        for k in range(5):
            w.send(rows("r1", 10 * k, 10))
            assert len(w._pending) <= writer_mod.IN_FLIGHT
        w.sync()
        assert not w.pending
        assert stored(db) == [(i, f"out {i}") for i in range(50)]
        w.send(rows("r1", 0, 3))  # the same rows again: one upsert each, no second copy
    finally:
        w.close()  # returns once the child closed the file, before it exits
    assert len(stored(db)) == 50
    w.reap()
    assert w.proc.returncode == 0


def test_the_child_copies_the_log_back_into_the_file_as_it_goes(tmp_path):
    """Every CHECKPOINT_BYTES of text the child checkpoints the log (after answering): the database
    file grows while the writer runs, instead of everything waiting in the log for the last close."""
    db = tmp_path / "f.db"
    fresh_store(db)
    before = db.stat().st_size
    w = RowWriter(db, upsert_sql(), 10_000)
    try:
        big = "x" * 10_000
        for k in range(3):  # 3 x 100 rows x 10 KB: past CHECKPOINT_BYTES
            w.send([r[:12] + (big,) + r[13:] for r in rows("r1", 100 * k, 100)])
        w.sync()
        assert writer_mod.CHECKPOINT_BYTES < 3 * 100 * 10_000
        deadline = time.monotonic() + 30
        while db.stat().st_size <= before + writer_mod.CHECKPOINT_BYTES // 2:
            assert time.monotonic() < deadline, "the log was never copied back"
            time.sleep(0.01)
    finally:
        w.close()
        w.reap()
    assert len(stored(db)) == 300


def test_a_group_the_child_cannot_commit_is_reported_with_its_rows(tmp_path):
    db = tmp_path / "f.db"
    fresh_store(db)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TRIGGER no7 BEFORE INSERT ON results WHEN NEW.test_idx = 7 "
                     "BEGIN SELECT RAISE(ABORT, 'row 7 refused'); END")
    w = RowWriter(db, upsert_sql(), 10_000)
    try:
        first, second, third = rows("r1", 0, 5), rows("r1", 5, 5), rows("r1", 10, 5)
        w.send(first)
        w.send(second)
        with pytest.raises(WriterError, match="row 7 refused") as caught:
            w.send(third)  # waits for the oldest (fine), then the second's answer: its failure
            w.sync()
        assert caught.value.rows == second
        assert isinstance(caught.value, sqlite3.Error)  # a store error like any other
        w.send(third)  # the child goes on with the next group
        w.sync()
    finally:
        w.close()
        w.reap()
    assert [r[0] for r in stored(db)] == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]


def test_a_dead_child_is_a_store_error_naming_the_rows_it_had(tmp_path):
    db = tmp_path / "f.db"
    fresh_store(db)
    w = RowWriter(db, upsert_sql(), 10_000)
    w.sync()
    os.kill(w.proc.pid, signal.SIGKILL)
    w.proc.wait()
    group = rows("r1", 0, 4)
    with pytest.raises(WriterError, match="the writer process ended") as caught:
        w.send(group)
        w.sync()
    assert caught.value.rows in ([], group)  # refused at the hand-over, or lost with the child
    w.close(wait_for_answer=False)


def test_a_group_cut_short_is_not_written_and_the_child_exits(tmp_path):
    """What a crash of the eval leaves in the pipe: whole groups are committed, half a group is not."""
    db = tmp_path / "f.db"
    fresh_store(db)
    w = RowWriter(db, upsert_sql(), 10_000)
    w.send(rows("r1", 0, 3))
    data = __import__("marshal").dumps(rows("r1", 3, 3))
    os.write(w._out, writer_mod._LEN.pack(len(data)) + data[: len(data) // 2])
    w.proc.stdin.close()
    assert w.proc.wait(timeout=30) == 0
    w.proc.stdout.close()
    assert [r[0] for r in stored(db)] == [0, 1, 2]


# ---------------------------------------------------------------- through the CLI


def stored_rows(db: Path, run_id: str) -> list[tuple]:
    fields = [f for f in RESULT_FIELDS if f not in ("run_id", "latency_ms", "extra_json", "created_at")]
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT {', '.join(fields)} FROM results WHERE run_id = ? ORDER BY seq",
                            (run_id,)).fetchall()


def written_by_the_eval(cfg: Path, out: Path, monkeypatch) -> Path:
    """The -o file of a run that writes its rows itself (no second process)."""
    monkeypatch.setattr(session, "WRITE_BEHIND_ROWS", 10**9)
    assert cli("eval", "--no-progress-bar", "-j", "1", "-c", cfg, "-o", out).exit_code == 100
    monkeypatch.setattr(session, "WRITE_BEHIND_ROWS", 5)
    return out


@pytest.fixture
def writers(monkeypatch):
    """Every RowWriter started, with a run of 5 rows or more written through one."""
    started = []
    original = RowWriter.__init__

    def spy(self, *args):
        original(self, *args)
        started.append(self)

    monkeypatch.setattr(RowWriter, "__init__", spy)
    monkeypatch.setattr(session, "GROUP_ROWS", 7)
    monkeypatch.setattr(session, "WRITE_BEHIND_ROWS", 5)
    return started


def test_a_run_written_by_the_second_process_stores_what_the_eval_would(tmp_path, isolated_home, monkeypatch,
                                                                         writers):
    cfg = write(tmp_path / "c.yaml", many_echo_tests(30))
    ok = written_by_the_eval(cfg, tmp_path / "ok.json", monkeypatch)
    assert writers == []
    behind = tmp_path / "behind.json"
    result = cli("eval", "--no-progress-bar", "-j", "1", "-c", cfg, "-o", behind)
    assert result.exit_code == 100, result.output
    assert len(writers) == 1 and writers[0].proc.returncode == 0  # started, and ended with the run
    assert result_rows(behind) == result_rows(ok)
    db = isolated_home / "factcli.db"
    with Store.open(db) as store:
        first, second = (r["id"] for r in reversed(store.list_runs()))
        assert store.resolve(second)["status"] == "complete" and store.resolve(second)["rows_done"] == 60
    assert stored_rows(db, second) == stored_rows(db, first)


def test_small_runs_and_a_single_core_write_in_the_eval(tmp_path, isolated_home, monkeypatch, writers):
    cfg = write(tmp_path / "c.yaml", many_echo_tests(2))  # 4 rows: under WRITE_BEHIND_ROWS
    assert cli("eval", "--no-progress-bar", "-c", cfg).exit_code == 100
    assert writers == []
    cfg = write(tmp_path / "c.yaml", many_echo_tests(10))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert cli("eval", "--no-progress-bar", "-c", cfg).exit_code == 100
    assert writers == []
    with Store.open(isolated_home / "factcli.db") as store:
        assert store.resolve("latest")["rows_done"] == 20


def test_when_the_second_process_fails_the_run_is_kept_in_memory(tmp_path, isolated_home, monkeypatch, writers):
    """The writer refuses a group: the eval warns, and its table and -o file still have every row
    (read back from the store, the rest held), as when the eval's own write fails."""
    cfg = write(tmp_path / "c.yaml", many_echo_tests(30))
    ok = tmp_path / "ok.json"
    assert cli("eval", "--no-progress-bar", "-j", "1", "-c", cfg, "-o", ok).exit_code == 100
    with sqlite3.connect(isolated_home / "factcli.db") as conn:  # the next run's row 20 is refused
        (first,) = conn.execute("SELECT id FROM runs").fetchone()
        conn.execute(f"CREATE TRIGGER no20 BEFORE INSERT ON results WHEN NEW.test_idx = 20 AND NEW.run_id != "
                     f"'{first}' BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END")
    failed = tmp_path / "failed.json"
    result = cli("eval", "--no-progress-bar", "-j", "1", "-c", cfg, "-o", failed)
    assert result.exit_code == 1 and "disk I/O error" in result.output, result.output
    assert "the rest of this run is not stored" in result.output and "Traceback" not in result.output
    assert len(writers) == 2 and all(w.proc.returncode == 0 for w in writers)
    assert result_rows(failed) == result_rows(ok)


def test_a_writer_killed_mid_run_leaves_every_row_in_the_table_and_files(tmp_path, isolated_home, monkeypatch,
                                                                        writers):
    cfg = write(tmp_path / "c.yaml", many_echo_tests(30))
    ok = written_by_the_eval(cfg, tmp_path / "ok.json", monkeypatch)
    sends = []
    original = RowWriter.send

    def send(self, group):
        sends.append(len(group))
        if len(sends) == 3:  # two groups in it: the child dies
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        original(self, group)

    monkeypatch.setattr(RowWriter, "send", send)
    failed = tmp_path / "failed.json"
    result = cli("eval", "--no-progress-bar", "-j", "1", "-c", cfg, "-o", failed)
    assert result.exit_code == 100 and "the writer process ended" in result.output, result.output
    assert result_rows(failed) == result_rows(ok)


def test_ctrl_c_inside_a_hand_over_writes_the_group_in_the_eval(tmp_path, isolated_home, monkeypatch, writers):
    """A KeyboardInterrupt while a group goes through the pipe: the writer is stopped (it commits what
    it has whole) and the run is finished by the eval itself, every row stored once."""
    cfg = write(tmp_path / "c.yaml", many_echo_tests(30))
    original = RowWriter._send
    calls = []

    def interrupted(self, data):
        calls.append(1)
        if len(calls) == 3:  # the header, then the first group, then this one
            os.write(self._out, writer_mod._LEN.pack(len(data)) + data[:10])
            raise KeyboardInterrupt
        original(self, data)

    monkeypatch.setattr(RowWriter, "_send", interrupted)
    result = cli("eval", "--no-progress-bar", "-j", "1", "-c", cfg)
    assert result.exit_code == 130, result.output
    assert writers[0].proc.returncode == 0
    with Store.open(isolated_home / "factcli.db") as store:
        run = store.resolve("latest")
        assert run["status"] == "interrupted"
        keys = [(r["test_idx"], r["prompt_idx"]) for r in store.results(run["id"])]
    assert len(keys) == len(set(keys)) == run["rows_done"] >= 14
    assert cli("eval", "--resume", "latest", "--no-progress-bar").exit_code == 100
    with Store.open(isolated_home / "factcli.db") as store:
        run = store.resolve("latest")
        assert run["status"] == "complete" and run["rows_done"] == 60


# ---------------------------------------------------------------- killed and interrupted, in subprocesses

N = 30_000


def _big(tmp_path: Path) -> Path:
    rows_csv = tmp_path / "rows.csv"
    rows_csv.write_text("q\n" + "".join(f"question {i}\n" for i in range(N)))
    return write(tmp_path / "c.yaml", "prompts: ['Answer: {{q}}']\nproviders: [echo]\n"
                 "defaultTest: {assert: [{type: contains, value: Answer}]}\ntests: file://rows.csv\n")


def _stored_count(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:  # not made yet
        return 0


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _start(cfg: Path, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "factcli", "eval", "-c", str(cfg), "--no-progress-bar",
                             "--no-table"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cfg.parent,
                            env=dict(os.environ), **kwargs)


def _when_stored(proc, db: Path, at_least: int) -> None:
    deadline = time.monotonic() + 60
    while _stored_count(db) < at_least:
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
        assert time.monotonic() < deadline, "the eval never stored enough rows"
        time.sleep(0.005)


@pytest.mark.skipif(not Path("/proc/self/stat").exists() or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux's /proc and two cores (the writer is used only then)")
def test_kill_9_of_the_eval_lets_the_writer_commit_what_it_has_then_resume(tmp_path, isolated_home):
    cfg = _big(tmp_path)
    db = isolated_home / "factcli.db"
    proc = _start(cfg)
    _when_stored(proc, db, 1000)
    children = _children(proc.pid)
    assert len(children) == 1, children  # the writer
    seen = _stored_count(db)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{children[0]}").exists() and "Z" not in Path(f"/proc/{children[0]}/stat").read_text().split()[2]:
        assert time.monotonic() < deadline, "the writer outlived the eval"
        time.sleep(0.01)
    after = _stored_count(db)
    assert seen <= after < N
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    result = cli("eval", "--resume", "latest", "--no-progress-bar", "--no-table")
    assert result.exit_code == 0, result.output
    assert f"{after} of {N} rows kept" in result.output
    with sqlite3.connect(db) as conn:
        keys = conn.execute("SELECT test_idx FROM results").fetchall()
        assert conn.execute("SELECT status, rows_done FROM runs").fetchone() == ("complete", N)
    assert sorted(k for (k,) in keys) == list(range(N))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores (the writer is used only then)")
def test_ctrl_c_in_the_terminal_stops_the_eval_which_stores_every_finished_row(tmp_path, isolated_home):
    cfg = _big(tmp_path)
    db = isolated_home / "factcli.db"
    proc = _start(cfg, preexec_fn=lambda: (ctrl_c_as_in_a_terminal(), os.setpgrp()))
    _when_stored(proc, db, 1000)
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal does: the foreground group
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr.decode()[-2000:]
    assert "Traceback" not in stderr.decode()
    with Store.open(db) as store:
        run = store.resolve("latest")
        assert run["status"] == "interrupted"
        assert run["rows_done"] == _stored_count(db) < N
    result = cli("eval", "--resume", "latest", "--no-progress-bar", "--no-table")
    assert result.exit_code == 0, result.output
    with Store.open(db) as store:
        assert store.resolve("latest")["rows_done"] == N
