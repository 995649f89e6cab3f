"""Crash and resume: `factcli eval` in a subprocess, SIGKILLed at seeded random points, then `--resume`.

Each attempt sends its own API key (OPENAI_API_KEY is read at call time, also on resume), so the
server's request log says exactly which process asked for which prompt, with no race against
requests the killed process still had in flight.
"""

import collections
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.store.database import Store

runner = CliRunner()
N = 40
SEED = 20261123

CONFIG = """
prompts: ["Q: {{n}}"]
providers: [{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
""" + "".join(f"  - vars: {{n: '{i}'}}\n    assert: [{{type: contains, value: 'Q: {i}'}}]\n" for i in range(N))


def asked_by(server, key: str) -> collections.Counter:
    """Prompts the server was asked for with this API key (one count per request)."""
    return collections.Counter(
        r["json"]["messages"][-1]["content"] for r in server.requests
        if r["json"] and r["headers"].get("Authorization") == f"Bearer {key}"
    )


def db_state(db):
    """Open the database as any reader would: it must be intact, with each row at most once."""
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = conn.execute("SELECT test_idx, prompt_idx, repeat_idx, success FROM results").fetchall()
        runs = conn.execute("SELECT id, status, rows_done FROM runs").fetchall()
    keys = [r[:3] for r in rows]
    assert len(keys) == len(set(keys)), "a row was stored twice"
    assert len(runs) == 1
    return rows, runs[0]


def start_and_kill(args, env_key, server, after_requests, extra_delay, cwd):
    """Start an eval subprocess and SIGKILL it once the server has seen `after_requests` of its
    requests, plus `extra_delay` seconds (so the kill also lands mid-write, not only mid-wait)."""
    env = dict(os.environ, OPENAI_API_KEY=env_key)
    proc = subprocess.Popen([sys.executable, "-m", "factcli", "eval", "--no-cache", "--no-progress-bar",
                             "--no-table", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            cwd=cwd)
    deadline = time.monotonic() + 60
    while sum(asked_by(server, env_key).values()) < after_requests and proc.poll() is None:
        assert time.monotonic() < deadline, "the eval never reached the kill point"
        time.sleep(0.005)
    time.sleep(extra_delay)
    finished_early = proc.poll() is not None
    proc.send_signal(signal.SIGKILL)
    _, stderr = proc.communicate(timeout=30)
    assert not finished_early, f"the eval ended before the kill point: {stderr.decode()[-2000:]}"
    assert proc.returncode == -signal.SIGKILL
    return stderr


def resume_in_process(monkeypatch, key):
    monkeypatch.setenv("OPENAI_API_KEY", key)
    result = runner.invoke(app, ["eval", "--resume", "latest", "--no-cache", "--no-progress-bar", "--no-table"])
    assert "Traceback" not in result.output
    return result


def kill_points(count: int, seed: int = SEED):
    rng = random.Random(seed)
    return [(rng.randint(2, N - 8), rng.uniform(0, 0.03)) for _ in range(count)]


@pytest.mark.parametrize("after_requests, extra_delay", kill_points(3))
def test_sigkill_at_a_random_point_then_resume(tmp_path, fake_openai, isolated_home, monkeypatch,
                                              after_requests, extra_delay):
    fake_openai.latency = 0.02
    cfg = write(tmp_path / "c.yaml", CONFIG)
    db = isolated_home / "factcli.db"
    start_and_kill(["-c", str(cfg), "-j", "4"], "first", fake_openai, after_requests, extra_delay, tmp_path)

    before, (run_id, status, rows_done) = db_state(db)
    assert status == "started" and len(before) < N  # never finalised (its counters are written at the end)
    with Store.open(db) as store:  # the store itself opens it
        assert store.resolve("latest")["id"] == run_id
    listed = runner.invoke(app, ["list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert "interrupted" in listed.output  # its process is gone: shown as interrupted, and resumable
    finished = {f"Q: {t}" for t, *_ in before}
    first = asked_by(fake_openai, "first")
    assert finished <= set(first) and all(n == 1 for n in first.values())

    result = resume_in_process(monkeypatch, "second")
    assert result.exit_code == 0, result.output
    second = asked_by(fake_openai, "second")
    assert not finished & set(second), "a finished row was requested again"
    assert set(second) == {f"Q: {i}" for i in range(N)} - finished  # every missing row, once
    assert all(n == 1 for n in second.values())

    after, (run_id2, status, rows_done) = db_state(db)
    assert run_id2 == run_id and status == "complete" and rows_done == N
    assert sorted(r[:3] for r in after) == [(i, 0, 0) for i in range(N)]
    assert all(r[3] == 1 for r in after)
    out = tmp_path / "r.json"
    assert runner.invoke(app, ["export", "latest", "-o", str(out)]).exit_code == 0
    assert [r["testIdx"] for r in json.loads(out.read_text())["results"]["results"]] == list(range(N))


def test_resume_killed_again_then_resumed(tmp_path, fake_openai, isolated_home, monkeypatch):
    """A resume is itself killed: the second resume still ends with each row exactly once."""
    fake_openai.latency = 0.02
    cfg = write(tmp_path / "c.yaml", CONFIG)
    db = isolated_home / "factcli.db"
    (a, da), (b, db_delay) = kill_points(2, seed=SEED + 1)
    start_and_kill(["-c", str(cfg), "-j", "4"], "k1", fake_openai, min(a, 12), da, tmp_path)
    done1 = {f"Q: {t}" for t, *_ in db_state(db)[0]}
    start_and_kill(["--resume", "latest", "-j", "2"], "k2", fake_openai, min(b, 8), db_delay, tmp_path)
    done2 = {f"Q: {t}" for t, *_ in db_state(db)[0]}
    assert done1 <= done2 and not done1 & set(asked_by(fake_openai, "k2"))

    result = resume_in_process(monkeypatch, "k3")
    assert result.exit_code == 0, result.output
    third = asked_by(fake_openai, "k3")
    assert set(third) == {f"Q: {i}" for i in range(N)} - done2 and all(n == 1 for n in third.values())
    rows, (_, status, rows_done) = db_state(db)
    assert status == "complete" and rows_done == N and len(rows) == N
    with Store.open(db) as store:
        assert store.resolve("latest")["attempts"] == 3
