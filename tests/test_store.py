"""The run store: migrations, round trips, resume after SIGKILL, retry/filter-failing, secrets, bad input."""

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, ctrl_c_as_in_a_terminal, many_echo_tests, result_rows, write
from parity_compare import differences
from typer.testing import CliRunner

from factcli.cli import app
from factcli.errors import FactcliError
from factcli.store.database import MIGRATION_NAMES, Store, default_path

runner = CliRunner()
PARITY = ROOT / "tests" / "parity"


def cli(*args):
    return runner.invoke(app, [*map(str, args)])


def evaluate(*args):
    return cli("eval", "--no-progress-bar", "--no-table", *args)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line_error(result, *needles):
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


ECHO = """
description: store test
prompts: ["Say {{word}}", "Shout {{word}}"]
providers: [echo]
derivedMetrics: [{name: double, value: "acc * 2"}]
tests:
  - description: greets
    vars: {word: hello}
    assert: [{type: contains, value: hello, metric: acc}]
  - vars: {word: bye}
    assert: [{type: contains, value: hello, metric: acc}]
"""


# ---------------------------------------------------------------- schema


def test_migrate_blank_db(tmp_path):
    path = tmp_path / "x.db"
    with Store.open(path, create=True) as store:
        tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"runs", "results", "columns", "_sqlite_migrations"} <= tables
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        applied = [r[0] for r in store.conn.execute("SELECT name FROM _sqlite_migrations ORDER BY id")]
        assert tuple(applied) == MIGRATION_NAMES
        unique = [r for r in store.conn.execute("PRAGMA index_list(results)") if r["unique"]]
        cols = {tuple(c["name"] for c in store.conn.execute(f"PRAGMA index_info('{r['name']}')")) for r in unique}
        assert ("run_id", "test_idx", "prompt_idx", "repeat_idx") in cols
    with Store.open(path) as store:  # migrating again changes nothing
        assert store.conn.execute("SELECT COUNT(*) FROM _sqlite_migrations").fetchone()[0] == len(MIGRATION_NAMES)
        assert store.run_count() == 0


def test_a_new_database_has_large_pages_and_one_made_before_keeps_its_own(tmp_path, monkeypatch):
    """store/sqlite_backend.PAGE_SIZE: a database factcli creates has it; one created with SQLite's
    default pages (as factcli made them before) is read and written as it is."""
    from factcli.store import sqlite_backend

    cfg = write(tmp_path / "c.yaml", ECHO)
    with Store.open(tmp_path / "new.db", create=True) as store:
        assert store.conn.execute("PRAGMA page_size").fetchone()[0] == sqlite_backend.PAGE_SIZE == 16384
    monkeypatch.setattr(sqlite_backend, "PAGE_SIZE", 4096)
    old = tmp_path / "old.db"
    assert evaluate("-c", cfg, "--db", old).exit_code == 100
    monkeypatch.undo()
    assert evaluate("-c", cfg, "--db", old).exit_code == 100
    with Store.open(old) as store:
        assert store.conn.execute("PRAGMA page_size").fetchone()[0] == 4096
        assert store.run_count() == 2
        assert store.conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 8
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_default_db_lives_in_factcli_home(tmp_path, isolated_home):
    assert evaluate("-c", write(tmp_path / "c.yaml", ECHO)).exit_code == 100
    assert default_path() == isolated_home / "factcli.db" and default_path().exists()
    with Store.open() as store:
        run = store.resolve("latest")
        assert run["status"] == "complete" and run["description"] == "store test"
        assert (run["successes"], run["failures"], run["errors"], run["total_steps"]) == (2, 2, 0, 4)


def test_no_write_and_db_flag(tmp_path, isolated_home):
    cfg = write(tmp_path / "c.yaml", ECHO)
    assert evaluate("-c", cfg, "--no-write").exit_code == 100
    assert not default_path().exists()
    other = tmp_path / "sub" / "runs.db"
    assert evaluate("-c", cfg, "--db", other).exit_code == 100
    assert other.exists() and not default_path().exists()
    assert "store test" in cli("list", "--db", other).output


def test_round_trip_of_every_parity_config(fake_openai, tmp_path, monkeypatch):
    """An export from the store is the document `eval -o` wrote: same rows, grading, metrics."""
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    for name in ("", "graders", "compare"):
        folder = PARITY / name if name else PARITY
        fake_openai.clear_rules()
        for pattern, reply, model in json.loads((folder / "rules.json").read_text()):
            fake_openai.add_rule(pattern, reply, model=model)
        fake_openai.refuse_response_format("json_schema", "json_object")  # the judge answers in words
        out, exported = tmp_path / f"eval-{name}.json", tmp_path / f"export-{name}.json"
        result = evaluate("-c", folder / "promptfooconfig.yaml", "-o", out)
        assert result.exit_code in (0, 100), result.output
        assert cli("export", "latest", "-o", exported).exit_code == 0
        ours, back = json.loads(out.read_text()), json.loads(exported.read_text())
        assert differences(back, ours) == [], name
        assert back["results"]["results"] == ours["results"]["results"], name
        assert back["results"]["prompts"] == ours["results"]["prompts"], name
        assert differences(back, json.loads((folder / "golden.json").read_text())) == [], name


def test_run_row_is_created_at_start_and_rows_written_in_groups_as_they_finish(tmp_path, monkeypatch):
    """Rows are committed in groups (GROUP_ROWS rows at most): another connection sees each group
    as soon as it is full, before the run ends, with the run row still `started`."""
    from factcli.run.recording import writer as writer_mod

    seen = []
    original = writer_mod.RowWriter.flush

    def spy(self):
        queued = len(self._group)
        original(self)
        if queued:
            with sqlite3.connect(self.store.path) as other:
                seen.append((queued, other.execute("SELECT status FROM runs").fetchone()[0],
                             other.execute("SELECT COUNT(*) FROM results").fetchone()[0]))

    monkeypatch.setattr(writer_mod, "GROUP_ROWS", 2)
    monkeypatch.setattr(writer_mod, "GROUP_S", 60.0)  # only full groups here: the time bound is the next test
    monkeypatch.setattr(writer_mod.RowWriter, "flush", spy)
    assert evaluate("-c", write(tmp_path / "c.yaml", ECHO), "-j", "1").exit_code == 100
    assert seen == [(2, "started", 2), (2, "started", 4)]


def test_a_row_is_committed_within_the_group_time_of_finishing(tmp_path, fake_openai, monkeypatch):
    """A slow model: each row is committed GROUP_S (0.1 s) after it finished, without waiting for
    the next row to fill its group, so a SIGKILL between calls loses nothing."""
    from factcli.run.recording import writer as writer_mod

    fake_openai.latency = 0.4
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    monkeypatch.setenv("FAKE_OPENAI_URL", fake_openai.url)
    seen = []
    original = writer_mod.RowWriter.write

    def spy(self, result):
        with sqlite3.connect(self.store.path) as other:  # before this row: every earlier one is in
            seen.append((self.seq, other.execute("SELECT COUNT(*) FROM results").fetchone()[0]))
        original(self, result)

    monkeypatch.setattr(writer_mod.RowWriter, "write", spy)
    cfg = write(tmp_path / "c.yaml", KILL_CONFIG.split("tests:")[0] + "tests:\n"
                + "".join(f"  - vars: {{n: '{i}'}}\n" for i in range(3)))
    assert evaluate("-c", cfg, "-j", "1", "--no-cache").exit_code == 0
    assert seen == [(0, 0), (1, 1), (2, 2)]


# ---------------------------------------------------------------- rows live in the store, not in memory

def _grab_run(monkeypatch) -> list:
    from factcli.run.flow import Flow

    runs, original = [], Flow.execute

    async def spy(self):
        runs.append(self.run)
        return await original(self)

    monkeypatch.setattr(Flow, "execute", spy)
    return runs


def test_a_stored_run_streams_its_rows_to_files_and_the_table(tmp_path, monkeypatch):
    """1,100 tests x 2 columns: the finished run holds no rows in memory, yet the table, the
    (streamed) JSON, JSONL and CSV have every row, in order, as the store's export has them."""
    runs = _grab_run(monkeypatch)
    cfg = write(tmp_path / "c.yaml", many_echo_tests(1100))
    outs = {f: tmp_path / f"eval.{f}" for f in ("json", "jsonl", "csv")}
    result = cli("eval", "--no-progress-bar", "-c", cfg, *[a for p in outs.values() for a in ("-o", p)])
    assert result.exit_code == 100, result.output
    run = runs[0]
    assert run.stored_rows is not None and run.rows == []
    assert "… 1050 more tests not shown" in result.output
    assert "q49" in result.output and "q50" not in result.output
    doc = json.loads(outs["json"].read_text())
    rows = doc["results"]["results"]
    assert [(r["testIdx"], r["promptIdx"]) for r in rows] == [(t, p) for t in range(1100) for p in (0, 1)]
    assert doc["vars"] == ["extra", "q"]
    assert doc["results"]["stats"]["successes"] == sum(r["success"] for r in rows) == 733  # column 0, i % 3 != 0
    assert len(outs["jsonl"].read_text().splitlines()) == 2200
    header = outs["csv"].read_text().splitlines()[0]
    assert header.startswith("Description,q,extra,[echo] Answer {{q}},Status,Score,Named Scores,Metric: m,")
    exported = tmp_path / "export.json"
    assert cli("export", "latest", "-o", exported).exit_code == 0
    back = json.loads(exported.read_text())
    assert back["results"]["results"] == rows
    assert differences(back, doc) == []


def test_the_streamed_json_is_the_document_byte_for_byte(tmp_path, monkeypatch):
    """write_json writes its rows one at a time: the bytes are json.dumps of the whole document,
    indented up to PRETTY_MAX_ROWS rows and on one line beyond (both checked, the limit lowered)."""
    import factcli
    from factcli.report import results_json as results

    run = factcli.evaluate(str(write(tmp_path / "c.yaml", many_echo_tests(40))))
    assert len(run.rows) == 80 and run.stored_rows is None
    empty = factcli.evaluate({"prompts": ["x"], "providers": ["echo"], "tests": [{"vars": {"a": "1"}}]},
                             filter_first_n=0)
    for case, limit, indent in ((run, 2000, 2), (run, 10, None), (empty, 2000, 2)):
        monkeypatch.setattr(results, "PRETTY_MAX_ROWS", limit)
        out = tmp_path / "out.json"
        results.write_json(case, out)
        text = out.read_text()
        doc = results.to_promptfoo_json(case)
        doc["metadata"]["exportedAt"] = json.loads(text)["metadata"]["exportedAt"]  # the time of writing
        assert text == json.dumps(doc, ensure_ascii=False, default=str, indent=indent) + "\n", (limit, indent)
        assert len(json.loads(text)["results"]["results"]) == len(case.rows)


def test_a_store_that_fails_mid_run_loses_no_row(tmp_path, monkeypatch):
    """The database stops taking rows after the 5th: the rows it has are read back, the rest stay
    in memory, and the table and -o file show all of them."""
    from factcli.store.sqlite_backend import SQLiteStore  # what Store.open returns for a file

    calls = []
    original = SQLiteStore.write_results

    def failing(self, rows):
        for row in rows:
            calls.append(1)
            if len(calls) > 5:
                raise sqlite3.OperationalError("disk I/O error")
            original(self, [row])

    monkeypatch.setattr(SQLiteStore, "write_results", failing)
    runs = _grab_run(monkeypatch)
    out = tmp_path / "out.json"
    result = cli("eval", "--no-progress-bar", "-j", "1", "-c", write(tmp_path / "c.yaml", many_echo_tests(30)), "-o", out)
    assert result.exit_code == 1, result.output  # the store failed (docs/commands.md)
    assert "disk I/O error" in result.output and "the rest of this run is not stored" in result.output
    assert "did not take 60 of this run's 60 rows" in result.output and "--resume" in result.output, result.output
    run = runs[0]
    assert run.stored_rows is None and len(run.rows) == 60
    rows = json.loads(out.read_text())["results"]["results"]
    assert [(r["testIdx"], r["promptIdx"]) for r in rows] == [(t, p) for t in range(30) for p in (0, 1)]
    assert len(_rows(default_path())) == 0  # the group's first 5 rows were rolled back with it


# ---------------------------------------------------------------- resume, retry, filter-failing

KILL_CONFIG = """
prompts: ["Q: {{n}}"]
providers: [{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
tests:
""" + "".join(f"  - vars: {{n: '{i}'}}\n    assert: [{{type: contains, value: 'Q: {i}'}}]\n" for i in range(40))


def _rows(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT test_idx, prompt_idx, repeat_idx FROM results").fetchall()


def test_sigkill_half_way_then_resume(tmp_path, fake_openai, isolated_home):
    fake_openai.latency = 0.05
    cfg = write(tmp_path / "c.yaml", KILL_CONFIG)
    db = isolated_home / "factcli.db"
    proc = subprocess.Popen([sys.executable, "-m", "factcli", "eval", "-c", str(cfg), "-j", "2", "--no-cache",
                             "--no-progress-bar", "--no-table"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=dict(os.environ))
    deadline = time.time() + 60
    finished = 0
    while time.time() < deadline:
        time.sleep(0.02)
        if db.exists():
            try:
                finished = len(_rows(db))
            except sqlite3.Error:
                continue
            if finished >= 15:
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert 15 <= finished < 40, finished
    time.sleep(0.3)  # requests the dead process had in flight have reached the server
    before_rows = _rows(db)
    assert len(before_rows) < 40 and len(set(before_rows)) == len(before_rows)
    with Store.open(db) as store:
        assert store.resolve("latest")["status"] == "started"  # never finalised
    finished_prompts = {f"Q: {t}" for t, _, _ in before_rows}
    already = fake_openai.request_count

    listed = cli("list").output
    assert "interrupted" in listed  # started, and its process is gone
    result = evaluate("--resume", "latest")
    assert result.exit_code == 0, result.output
    assert f"{len(before_rows)} of 40 rows kept" in result.output

    new_requests = fake_openai.requests[already:] if already < 10_000 else []
    asked = [r["json"]["messages"][-1]["content"] for r in new_requests]
    assert fake_openai.request_count - already == 40 - len(before_rows)
    assert not (set(asked) & finished_prompts)  # no provider call for a row that had finished
    rows = _rows(db)
    assert len(rows) == 40 and len(set(rows)) == 40 and {t for t, _, _ in rows} == set(range(40))
    with Store.open(db) as store:
        run = store.resolve("latest")
        assert run["status"] == "complete" and run["successes"] == 40 and run["attempts"] == 2
        assert store.run_count() == 1
    out = tmp_path / "r.json"
    assert cli("export", "latest", "-o", out).exit_code == 0
    doc = json.loads(out.read_text())
    assert [r["testIdx"] for r in doc["results"]["results"]] == list(range(40))
    assert doc["results"]["prompts"][0]["metrics"]["testPassCount"] == 40
    # a complete run has nothing to resume
    one_line_error(evaluate("--resume", "latest"), "nothing to resume")


def test_ctrl_c_marks_the_run_interrupted_and_resume_finishes_it(tmp_path, fake_openai, isolated_home):
    fake_openai.latency = 0.1
    cfg = write(tmp_path / "c.yaml", KILL_CONFIG)
    proc = subprocess.Popen([sys.executable, "-m", "factcli", "eval", "-c", str(cfg), "-j", "1", "--no-cache",
                             "--no-progress-bar", "--no-table"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ), preexec_fn=ctrl_c_as_in_a_terminal)
    deadline = time.time() + 30
    while fake_openai.request_count < 4 and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr.decode()
    with Store.open() as store:
        run = store.resolve("latest")
        assert run["status"] == "interrupted" and run["finished_at"]
        done = run["rows_done"]
    assert 2 <= done < 40
    fake_openai.reset()
    assert evaluate("--resume", run["id"][:20], "-j", "8").exit_code == 0  # -j may change on resume
    assert fake_openai.request_count == 40 - done
    assert len(_rows(isolated_home / "factcli.db")) == 40


def test_retry_errors_reruns_only_error_rows(tmp_path, fake_openai, monkeypatch, db_target):
    monkeypatch.setenv("FACTCLI_DB", db_target)  # both backends
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    cfg = write(tmp_path / "c.yaml", KILL_CONFIG.split("tests:")[0] + "tests:\n" + "".join(
        f"  - vars: {{n: '{i}'}}\n    assert: [{{type: contains, value: 'Q: 1'}}]\n" for i in range(4)))
    fake_openai.enqueue_fault(status=400)  # the first request: an ERROR row
    assert evaluate("-c", cfg, "-j", "1", "--no-cache").exit_code == 100
    with Store.open() as store:
        first = store.resolve("latest")
        assert (first["successes"], first["failures"], first["errors"]) == (1, 2, 1)
    fake_openai.reset()
    result = evaluate("--retry-errors", "latest")
    assert result.exit_code == 100, result.output
    assert fake_openai.request_count == 1
    with Store.open() as store:
        run = store.resolve("latest")
        assert run["id"] == first["id"] and store.run_count() == 1
        assert (run["successes"], run["failures"], run["errors"]) == (1, 3, 0)
    # --filter-failing: a new run with only the tests that failed there (matched by vars, not position)
    fake_openai.reset()
    result = evaluate("-c", cfg, "--filter-failing", first["id"], "--no-cache")
    assert "3 of 4 tests failed or errored" in result.output
    assert fake_openai.request_count == 3
    with Store.open() as store:
        assert store.run_count() == 2
        newest = store.resolve("latest")
        assert newest["id"] != first["id"] and newest["total_steps"] == 3
        assert json.loads(newest["options_json"])["filter_failing"] == first["id"]


def test_resume_uses_the_stored_config_when_the_files_are_gone(tmp_path, fake_openai, isolated_home, monkeypatch):
    monkeypatch.setenv("FACTCLI_MAX_RETRIES", "0")
    monkeypatch.setenv("PLANTED_SERVICE_KEY", "sk-planted-resume-12345")
    cfg = write(tmp_path / "gone" / "c.yaml", """
prompts: ["Q: {{n}}"]
providers: [{id: "openai:chat:m1", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}", apiKey: "${PLANTED_SERVICE_KEY}"}}]
tests: [{vars: {n: '1'}}, {vars: {n: '2'}}]
""")
    fake_openai.enqueue_fault(status=500)
    assert evaluate("-c", cfg, "--no-cache", "-j", "1").exit_code == 100
    cfg.unlink()
    fake_openai.reset()
    refused = evaluate("--retry-errors", "latest")  # the stored config's endpoint and env vars: listed
    assert refused.exit_code == 1 and fake_openai.request_count == 0, refused.output
    assert refused.output.strip().splitlines()[1:] == [
        "  - env: providers[0].config.apiBaseUrl: reads FAKE_OPENAI_URL",
        "  - sends your credential to: providers[0].config.apiBaseUrl: {{ env.FAKE_OPENAI_URL }}",
        "  - env: providers[0].config.apiKey: reads PLANTED_SERVICE_KEY"]
    result = evaluate("--retry-errors", "latest", "--trust-stored-config")
    assert result.exit_code == 0, result.output
    assert "using the config stored with the run" in result.output
    # ${NAME} references resolve at resume time: the key reached the server, and was never stored
    assert fake_openai.requests[0]["headers"]["Authorization"] == "Bearer sk-planted-resume-12345"
    for f in isolated_home.glob("factcli.db*"):
        assert b"sk-planted-resume-12345" not in f.read_bytes()


def test_an_aborted_run_is_stored_and_resumable(tmp_path, fake_openai):
    cfg = write(tmp_path / "c.yaml", KILL_CONFIG)
    fake_openai.enqueue_fault(status=401)
    result = evaluate("-c", cfg, "-j", "1", "--no-cache")
    assert result.exit_code == 3, result.output
    with Store.open() as store:
        run = store.resolve("latest")
        assert run["status"] == "aborted" and "401" in run["abort_reason"] and run["rows_done"] == 0
    fake_openai.reset()
    assert evaluate("--resume", "latest").exit_code == 0
    assert fake_openai.request_count == 40
    with Store.open() as store:
        assert store.resolve("latest")["status"] == "complete"


def test_resume_flag_conflicts(tmp_path):
    cfg = write(tmp_path / "c.yaml", ECHO)
    evaluate("-c", cfg)
    one_line_error(evaluate("--resume", "latest", "-c", cfg), "drop -c")
    one_line_error(evaluate("--resume", "latest", "--no-write"), "--no-write")
    one_line_error(evaluate("--resume", "latest", "--retry-errors", "latest"), "cannot be combined")


# ---------------------------------------------------------------- secrets

SECRETS = """
prompts: ["{{ env.PLANTED_SERVICE_TOKEN }} says {{word}} {{leak}}"]
providers:
  - id: openai:chat:m1
    config:
      apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"
      apiKey: sk-planted-literal-key-0001
      headers: {X-Custom-Auth: hdr-planted-secret-0002, X-Trace: trace-visible}
tests:
  - vars: {word: hi, leak: sk-planted-literal-key-0001}
    assert: [{type: contains, value: hi}]
  - vars: {word: bye, leak: none}
    assert: [{type: contains, value: nothing-matches}]
"""
PLANTED = (b"sk-planted-literal-key-0001", b"hdr-planted-secret-0002", b"tok-planted-env-0003",
           b"sk-planted-openai-env-0004")


def test_planted_secrets_appear_nowhere(tmp_path, fake_openai, isolated_home, monkeypatch):
    monkeypatch.setenv("PLANTED_SERVICE_TOKEN", "tok-planted-env-0003")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-openai-env-0004")
    cfg = write(tmp_path / "c.yaml", SECRETS)
    formats = ("json", "jsonl", "yaml", "csv", "xml", "junit.xml", "html")
    outs = [tmp_path / f"eval.{f}" for f in formats]
    result = evaluate("-c", cfg, "--no-cache", *[a for p in outs for a in ("-o", p)])
    assert result.exit_code == 100, result.output
    # the secrets were really used: the key and header went out, the token reached the output
    req = fake_openai.requests[0]
    assert req["headers"]["Authorization"] == "Bearer sk-planted-literal-key-0001"
    assert req["headers"]["X-Custom-Auth"] == "hdr-planted-secret-0002"
    assert "tok-planted-env-0003" in req["json"]["messages"][-1]["content"]
    exports = [tmp_path / f"export.{f}" for f in formats]
    assert cli("export", "latest", *[a for p in exports for a in ("-o", p)]).exit_code == 0
    files = [*outs, *exports, *isolated_home.glob("factcli.db*")]
    assert len(files) >= 15
    for f in files:
        blob = f.read_bytes()
        for secret in PLANTED:
            assert secret not in blob, (f.name, secret)
    with Store.open() as store:
        run = store.resolve("latest")
        config = json.loads(run["config_json"])
        assert config["providers"][0]["config"]["apiKey"] == "[redacted]"
        assert config["providers"][0]["config"]["headers"] == {"X-Custom-Auth": "[redacted]", "X-Trace": "[redacted]"}
        out = store.conn.execute("SELECT output FROM results ORDER BY test_idx").fetchone()[0]
        assert out.startswith("Echo: ${PLANTED_SERVICE_TOKEN} says hi [redacted]")
    for view_args in (["view", "--full"], ["view", "--json"], ["show", "latest", "0"], ["show", "latest"]):
        shown = cli(*view_args).output.encode()
        assert not any(s in shown for s in PLANTED), view_args


# ---------------------------------------------------------------- bad input


def test_unknown_or_ambiguous_run_id_is_one_line(tmp_path):
    cfg = write(tmp_path / "c.yaml", ECHO)
    evaluate("-c", cfg)
    evaluate("-c", cfg)
    for args in (["view", "nope"], ["show", "nope"], ["export", "nope", "-o", tmp_path / "x.json"],
                 ["delete", "nope"], ["diff", "latest", "nope"]):
        one_line_error(cli(*args), "no run 'nope'")
    one_line_error(cli("view", "eval-"), "ambiguous")
    one_line_error(evaluate("--resume", "nope"), "no run 'nope'")
    one_line_error(evaluate("-c", cfg, "--filter-failing", "nope"), "no run 'nope'")
    one_line_error(cli("show", "latest", "99"), "no test 99")


def test_missing_database_is_one_line_and_not_created(tmp_path):
    missing = tmp_path / "missing.db"
    for args in (["view"], ["show", "latest"], ["export", "latest", "-o", tmp_path / "x.json"], ["delete", "x"],
                 ["list"]):
        one_line_error(cli(*args, "--db", missing), "does not exist")
    one_line_error(evaluate("--resume", "latest", "--db", missing), "does not exist")
    assert not missing.exists()
    assert "No runs stored yet" in cli("list").output  # the default database: simply empty
    assert not default_path().exists()


@pytest.mark.parametrize("content", [b"this is not a database at all" * 100, b"SQLite format 3\x00" + b"\x01" * 4000])
def test_corrupt_database_is_one_line_and_untouched(tmp_path, fake_openai, content):
    bad = tmp_path / "bad.db"
    bad.write_bytes(content)
    before = digest(bad)
    for args in (["view"], ["list"], ["show", "latest"], ["delete", "latest"], ["diff", "a", "b"]):
        one_line_error(cli(*args, "--db", bad), str(bad))
    cfg = write(tmp_path / "c.yaml", KILL_CONFIG)
    one_line_error(evaluate("-c", cfg, "--db", bad), str(bad))
    assert fake_openai.request_count == 0  # nothing was called
    assert digest(bad) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("bad.db")) == ["bad.db"]


def test_database_from_a_newer_factcli_is_refused(tmp_path):
    path = tmp_path / "new.db"
    evaluate("-c", write(tmp_path / "c.yaml", ECHO), "--db", path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES "
                     "('factcli', 'm999_from_the_future', '2030-01-01')")
    before = digest(path)
    one_line_error(cli("list", "--db", path), "newer factcli")
    one_line_error(cli("view", "--db", path), "newer factcli")
    one_line_error(evaluate("-c", tmp_path / "c.yaml", "--db", path), "newer factcli")
    assert digest(path) == before
    with pytest.raises(FactcliError):
        Store.open(path)


def test_a_foreign_database_is_not_touched(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE runs (x TEXT)")
        conn.execute("INSERT INTO runs VALUES ('keep me')")
    before = digest(path)
    one_line_error(cli("list", "--db", path), "not a factcli database")
    one_line_error(evaluate("-c", write(tmp_path / "c.yaml", ECHO), "--db", path), "not a factcli database")
    assert digest(path) == before


def test_delete(tmp_path):
    cfg = write(tmp_path / "c.yaml", ECHO)
    evaluate("-c", cfg)
    evaluate("-c", cfg)
    with Store.open() as store:
        first = store.list_runs()[-1]["id"]
    result = cli("delete", first)
    assert result.exit_code == 0 and f"Deleted run {first} (4 rows)" in result.output
    with Store.open() as store:
        assert store.run_count() == 1
        assert store.conn.execute("SELECT COUNT(*) FROM results WHERE run_id = ?", (first,)).fetchone()[0] == 0
        assert store.conn.execute("SELECT COUNT(*) FROM columns WHERE run_id = ?", (first,)).fetchone()[0] == 0


def test_a_group_the_store_fails_to_take_is_shown_as_the_store_would_give_it(tmp_path, monkeypatch):
    """The rows of a group the store fails to write are not held as they ran (that cost ~3 us a row)
    but read back from the group's tuples (RowWriter._unwritten): the -o file of a run whose store
    fails at its second group equals that of a run whose store took every row."""
    from factcli.run.recording import writer
    from factcli.store.sqlite_backend import SQLiteStore

    monkeypatch.setattr(writer, "GROUP_ROWS", 7)  # groups flushed by their size, with a current row
    cfg = write(tmp_path / "c.yaml", many_echo_tests(30))

    ok = tmp_path / "ok.json"
    assert cli("eval", "--no-progress-bar", "-j", "1", "-c", cfg, "-o", ok).exit_code == 100
    calls = []
    original = SQLiteStore.write_results

    def failing(self, rows):
        calls.append(len(rows))
        if len(calls) >= 2:  # from the second group on, for good
            raise sqlite3.OperationalError("disk I/O error")
        original(self, rows)

    monkeypatch.setattr(SQLiteStore, "write_results", failing)
    runs = _grab_run(monkeypatch)
    failed = tmp_path / "failed.json"
    result = cli("eval", "--no-progress-bar", "-j", "1", "-c", cfg, "-o", failed)
    assert result.exit_code == 1 and "the rest of this run is not stored" in result.output, result.output
    assert calls[:2] == [7, 7] and runs[0].stored_rows is None and len(runs[0].rows) == 60
    assert result_rows(failed) == result_rows(ok)


def test_a_store_that_fails_for_a_moment_gets_every_row(tmp_path, monkeypatch):
    """SQLite refuses one group (a full disk, a lock held past the timeout): the rows are held, the
    store is tried again as the run goes on, and takes them all; the exit code is the run's."""
    from factcli.run.recording import writer
    from factcli.store.sqlite_backend import SQLiteStore

    monkeypatch.setenv("FACTCLI_STORE_TIMEOUT", "30")
    monkeypatch.setattr(writer, "GROUP_ROWS", 7)
    calls = []
    original = SQLiteStore.write_results

    def failing(self, rows):
        calls.append(len(rows))
        if len(calls) == 2:
            raise sqlite3.OperationalError("database is locked")
        original(self, rows)

    monkeypatch.setattr(SQLiteStore, "write_results", failing)
    out = tmp_path / "out.json"
    result = cli("eval", "--no-progress-bar", "-j", "1", "-c", write(tmp_path / "c.yaml", many_echo_tests(30)),
                 "-o", out)
    assert result.exit_code == 100, result.output
    assert "database is locked" in result.output and "rows held meanwhile are stored" in result.output
    assert sorted(_rows(default_path())) == [(t, p, 0) for t in range(30) for p in (0, 1)]
    with Store.open(default_path()) as store:
        run = store.resolve("latest")
    assert (run["status"], run["rows_done"], run["successes"]) == ("complete", 60, 20)
    assert len(result_rows(out)) == 60


def test_the_store_its_folder_and_exports_are_owner_only(tmp_path, monkeypatch):
    """Issue 48: factcli.db and exports were created 0644. New ones are 0600 in a new folder 0700 (a
    stricter umask still wins); a file or folder that exists keeps its mode."""
    import stat

    from typer.testing import CliRunner

    from factcli.cli import app

    def mode(p):
        return stat.S_IMODE(p.stat().st_mode)

    run = CliRunner().invoke
    home = tmp_path / "home" / "nested"
    monkeypatch.setenv("FACTCLI_HOME", str(home))
    cfg = tmp_path / "c.yaml"
    cfg.write_text("prompts: ['{{w}}']\nproviders: [echo]\ntests: [{vars: {w: hi}}]\n")
    old = os.umask(0o022)
    try:
        out = tmp_path / "out" / "r.json"
        result = run(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-table", "-o", str(out),
                           "-o", str(tmp_path / "r.csv")])
        assert result.exit_code == 0, result.output
        assert mode(home / "factcli.db") == 0o600 and mode(home) == 0o700 and mode(home.parent) == 0o700
        for p in home.glob("factcli.db-*"):  # SQLite's -wal and -shm take the database's mode
            assert mode(p) == 0o600, p
        assert mode(out) == 0o600 and mode(out.parent) == 0o700 and mode(tmp_path / "r.csv") == 0o600
        assert run(app, ["export", "latest", "-o", str(tmp_path / "e.jsonl")]).exit_code == 0
        assert mode(tmp_path / "e.jsonl") == 0o600
        kept = tmp_path / "kept.json"
        kept.write_text("{}")
        kept.chmod(0o644)
        assert run(app, ["export", "latest", "-o", str(kept)]).exit_code == 0
        assert mode(kept) == 0o644  # the user's own file keeps its mode
        os.umask(0o077)
        monkeypatch.setenv("FACTCLI_HOME", str(tmp_path / "strict"))
        assert run(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-table"]).exit_code == 0
        assert mode(tmp_path / "strict" / "factcli.db") == 0o600
        os.umask(0o037)  # stricter than 0700 for the folder (the umask wins), as strict for the file
        monkeypatch.setenv("FACTCLI_HOME", str(tmp_path / "stricter" / "h"))
        assert run(app, ["eval", "-c", str(cfg), "--no-progress-bar", "--no-table", "--no-cache"]).exit_code == 0
        assert mode(tmp_path / "stricter" / "h" / "factcli.db") == 0o600 and mode(tmp_path / "stricter") == 0o700
    finally:
        os.umask(old)
