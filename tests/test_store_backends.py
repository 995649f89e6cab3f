"""The store on both backends (SQLite and PostgreSQL, the `db_target` fixture of conftest.py): the
interface, every command that reads or writes a store, ratings, copy between stores, and the same
config giving the same rows in both."""

import json
import sqlite3

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.store import ratings as R
from factcli.store.database import MIGRATION_NAMES, RESULT_FIELDS, Store, is_url

runner = CliRunner()

ECHO = """
description: both stores
prompts: ["Say {{word}}", "Shout {{word}}"]
providers: [echo]
derivedMetrics: [{name: double, value: "acc * 2"}]
tests:
  - description: greets
    vars: {word: hello}
    assert: [{type: contains, value: hello, metric: acc}, {type: python, value: "len(output) > 3"}]
  - vars: {word: bye}
    assert: [{type: contains, value: hello, metric: acc}]
  - vars: {word: "50% off_now"}
    assert: [{type: icontains, value: "50%"}]
"""


def cli(*args):
    return runner.invoke(app, [*map(str, args)])


def _record(run_id, t, p, **over):
    rec = {f: None for f in RESULT_FIELDS}
    rec.update(run_id=run_id, test_idx=t, prompt_idx=p, repeat_idx=0, provider_idx=0, seq=t * 2 + p,
               test_key=f"k{t}", success=1, failure_reason=0, score=1.0, output=f"out {t} {p}", output_json=0,
               named_scores_json='{"acc": 1}', vars_json="{}", extra_json="{}", created_at="2026-01-01T00:00:00")
    rec.update(over)
    return tuple(rec[f] for f in RESULT_FIELDS)


def _run_row(run_id, created="2026-01-01T00:00:00.000+00:00"):
    return {"id": run_id, "created_at": created, "updated_at": created, "status": "complete",
            "finished_at": created, "total_steps": 4, "pid": 1, "host": "elsewhere", "attempts": 1}


def test_schema_and_migrations(db_target):
    with Store.open(db_target, create=True) as store:
        assert store.kind == ("postgresql" if is_url(db_target) else "sqlite")
        table = "factcli_migrations" if is_url(db_target) else "_sqlite_migrations"
        assert tuple(r[0] for r in store.execute(f"SELECT name FROM {table} ORDER BY name")) == MIGRATION_NAMES
        assert store.run_count() == 0
    with Store.open(db_target) as store:  # opening again applies nothing twice
        assert store.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == len(MIGRATION_NAMES)
        store.execute(f"INSERT INTO {table} (migration_set, name, applied_at) VALUES ('factcli', 'm999_future', 'x')")
        store.commit()
    result = cli("list", "--db", db_target)
    assert result.exit_code == 1 and "newer factcli (schema m999_future)" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_interface(db_target):
    with Store.open(db_target, create=True) as store:
        store.insert_run(_run_row("eval-a-111aaa", "2026-01-01T00:00:00.000+00:00"))
        store.insert_run(_run_row("eval-b-222bbb", "2026-01-02T00:00:00.000+00:00"))
        store.set_columns("eval-a-111aaa", [{"prompt_idx": 0, "provider_id": "echo", "prompt_raw": "p0"},
                                            {"prompt_idx": 1, "provider_id": "echo", "prompt_raw": "p1"}])
        rows = [_record("eval-a-111aaa", t, p) for t in range(2) for p in range(2)]
        store.write_results(rows)
        store.write_results([_record("eval-a-111aaa", 1, 1, success=0, failure_reason=2, output="nul\x00byte",
                                     error="boom")])  # an upsert: one row, replaced
        store.commit()
        assert store.result_count("eval-a-111aaa") == 4
        assert store.counts("eval-a-111aaa") == {0: {"pass": 2, "fail": 0, "error": 0, "notJudged": 0},
                                                 1: {"pass": 1, "fail": 0, "error": 1, "notJudged": 0}}
        assert store.not_judged("eval-a-111aaa") == 0
        assert store.done_keys("eval-a-111aaa")[(1, 1, 0)] == (2, "k1")
        last = list(store.results("eval-a-111aaa", "test_idx = ?", [1], order="prompt_idx"))[-1]
        assert last["error"] == "boom" and last["output"] in ("nul\x00byte", "nul\ufffdbyte")
        assert store.first_failed_test("eval-a-111aaa") == 1
        assert store.resolve("latest")["id"] == "eval-b-222bbb"
        assert store.resolve("111a")["id"] == "eval-a-111aaa" and store.resolve("EVAL-A")["id"] == "eval-a-111aaa"
        with pytest.raises(Exception, match="ambiguous"):
            store.resolve("eval-")
        with pytest.raises(Exception, match="no run '50%'"):
            store.resolve("50%")
        store.set_column_metrics("eval-a-111aaa", ['{"rows": 2}', '{"rows": 2}'])
        assert [c["metrics_json"] for c in store.columns("eval-a-111aaa")] == ['{"rows": 2}'] * 2
        store.update_run("eval-a-111aaa", {"description": "it's 100%"})
        assert [r["id"] for r in store.list_runs()] == ["eval-b-222bbb", "eval-a-111aaa"]
        rating = R.add_rating(store, "eval-a-111aaa", test_idx=0, prompt_idx=1, passed=False, rater="ana")
        assert R.retract_rating(store, rating) and not R.retract_rating(store, rating)
        assert store.delete_run("eval-a-111aaa") == 4
        assert store.run_count() == 1 and store.execute("SELECT COUNT(*) FROM ratings").fetchone()[0] == 0


def _eval(db, cfg, *extra):
    result = cli("eval", "-c", cfg, "--db", db, "--no-progress-bar", "--no-table", *extra)
    assert result.exit_code == 100, result.output
    return result


def test_every_command_on_both_stores(db_target, tmp_path):
    cfg = write(tmp_path / "c.yaml", ECHO)
    _eval(db_target, cfg)
    _eval(db_target, cfg, "--description", "second")
    listed = json.loads(cli("list", "--json", "--db", db_target).output)
    assert [r["description"] for r in listed] == ["second", "both stores"] and listed[0]["rows"] == 6
    doc = json.loads(cli("view", "--json", "--db", db_target).output)
    assert doc["run"]["successes"] == 4 and [t["testIdx"] for t in doc["tests"]] == [0, 1, 2]
    for args, tests in ((["--failures"], [1]), (["--filter", "HELLO"], [0, 1]), (["--filter", "50%"], [2]),
                        (["--filter", "f_n"], [2])):
        page = json.loads(cli("view", "--json", *args, "--db", db_target).output)
        assert [t["testIdx"] for t in page["tests"]] == tests, args
    assert "Say hello" in cli("show", "latest", "0", "--db", db_target).output
    a, b = (r["id"] for r in listed)
    diff = json.loads(cli("diff", b, a, "--json", "--db", db_target).output)
    assert (diff["a"], diff["b"], diff["unchanged"], diff["flips"]) == (b, a, 6, [])
    out = tmp_path / "r.json"
    assert cli("export", "latest", "-o", out, "-o", tmp_path / "r.csv", "--db", db_target).exit_code == 0
    assert [r["testIdx"] for r in json.loads(out.read_text())["results"]["results"]] == [0, 0, 1, 1, 2, 2]
    with Store.open(db_target) as store:
        R.add_rating(store, a, test_idx=1, prompt_idx=0, passed=True, rater="ana")
    labels = tmp_path / "l.jsonl"
    assert cli("ratings", "export", a, "-o", labels, "--db", db_target).exit_code == 0
    assert [json.loads(line) for line in labels.read_text().splitlines()] == \
        [{"id": "test1-col0", "question": "Say bye", "output": "Say bye", "label": "pass", "word": "bye"}]
    # the web view reads the same store
    from starlette.testclient import TestClient

    from factcli.web.app import create_app

    with TestClient(create_app(db_target, token="tok")) as client:
        home = client.get("/").text
        assert a in home
        if is_url(db_target):  # the page names the store without its password
            password = db_target.split(":")[2].split("@")[0]
            assert "factcli_test:***@127.0.0.1" in home and password not in home
        assert "Say hello" in client.get(f"/runs/{a}").text
        assert client.get(f"/runs/{a}?q=hello&metric=acc").status_code == 200
        assert "Say hello" in client.get(f"/runs/{a}/cell/0/0").text
        posted = client.post(f"/api/runs/{a}/ratings", json={"test_idx": 0, "prompt_idx": 0, "verdict": "fail",
                                                              "rater": "bo", "token": "tok"})
        assert posted.status_code == 201 and posted.json()["rater"] == "bo"
        assert client.get(f"/runs/{a}/disagreements").status_code == 200
        assert client.get(f"/compare?a={a}&b={b}").status_code == 200
    assert cli("delete", b, "--db", db_target).exit_code == 0


def _rows(db) -> list[dict]:
    keep = ("test_idx", "prompt_idx", "repeat_idx", "success", "failure_reason", "score", "error", "output",
            "named_scores_json", "grading_json", "vars_json", "test_key", "rendered_prompt")
    with Store.open(db) as store:
        run = store.resolve("latest")
        return [{k: r[k] for k in keep} for r in store.results(run["id"], order="test_idx, prompt_idx")]


def test_same_config_same_rows_in_both_stores_and_copy_both_ways(pg_url, tmp_path):
    cfg = write(tmp_path / "c.yaml", ECHO)
    lite = str(tmp_path / "a.db")
    _eval(lite, cfg)
    _eval(pg_url, cfg)
    assert _rows(lite) == _rows(pg_url) and len(_rows(lite)) == 6
    # copy SQLite -> PostgreSQL with a rating, twice: nothing duplicated
    with Store.open(lite) as store:
        run_id = store.resolve("latest")["id"]
        R.add_rating(store, run_id, test_idx=0, prompt_idx=0, passed=False, comment="too loud", rater="ana")
        gone = R.add_rating(store, run_id, test_idx=1, prompt_idx=0, passed=True)
    for _ in range(2):
        result = cli("copy", run_id, "--to", pg_url, "--db", lite)
        assert result.exit_code == 0 and f"Copied run {run_id}: 6 rows" in result.output, result.output
        assert "***" in result.output and "pw-" not in result.output
    with Store.open(lite) as store:
        R.retract_rating(store, gone)
    assert cli("copy", run_id, "--to", pg_url, "--db", lite).exit_code == 0  # the retraction is carried over
    with Store.open(pg_url) as store:
        assert store.run_count() == 2 and store.result_count(run_id) == 6
        assert [(r["rater"], r["retractedAt"] is not None) for r in R.ratings_for_row(store, run_id, 0, 0)] == \
            [("ana", False)]
        assert len(R.ratings_for_run(store, run_id)) == 1
        assert store.execute("SELECT COUNT(*) FROM ratings").fetchone()[0] == 2
    # and back, into a new SQLite file: the same rows and ratings
    back = str(tmp_path / "back.db")
    assert cli("copy", run_id[-6:], "--to", back, "--db", pg_url).exit_code == 0
    assert cli("copy", run_id[-6:], "--to", back, "--db", pg_url).exit_code == 0
    with Store.open(back) as a, Store.open(lite) as b:
        fields = ", ".join(RESULT_FIELDS)  # every column but the row's id in its own table
        assert [dict(r) for r in a.execute(f"SELECT {fields} FROM results ORDER BY test_idx, prompt_idx")] == \
            [dict(r) for r in b.execute(f"SELECT {fields} FROM results ORDER BY test_idx, prompt_idx")]
        assert dict(a.resolve(run_id)) == dict(b.resolve(run_id))
        assert R.ratings_for_run(a, run_id) == R.ratings_for_run(b, run_id)
    result = cli("copy", run_id, "--to", lite, "--db", lite)
    assert result.exit_code == 1 and "is the store the runs are in" in result.output


def test_a_postgres_url_never_becomes_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = "postgresql://ana:hunter2-secret@127.0.0.1:1/team"
    for args in (["list"], ["view"], ["eval", "-c", write(tmp_path / "c.yaml", ECHO), "--no-progress-bar"]):
        result = cli(*args, "--db", url)
        assert result.exit_code == 1, result.output
        assert "postgresql://ana:***@127.0.0.1:1/team" in result.output and "hunter2" not in result.output
        assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]
    assert not list(tmp_path.rglob("*hunter2*"))


def test_without_the_driver_one_line_says_how_to_install(monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)
    result = cli("list", "--db", "postgres://ana:pw-x@db.example/team")
    assert result.exit_code == 1 and "pip install 'factcli[postgres]'" in result.output
    assert "postgres://ana:***@db.example/team" in result.output and "pw-x" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_factcli_db_selects_the_store(pg_url, pg_cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTCLI_DB", pg_url)
    cfg = write(tmp_path / "c.yaml", ECHO.replace("Shout {{word}}", "Shout {{word}} to {{ env.FACTCLI_DB }}"))
    assert cli("eval", "-c", cfg, "--no-progress-bar", "--no-table").exit_code == 100
    with Store.open(pg_url) as store:
        assert store.run_count() == 1
        outputs = [r["output"] for r in store.execute("SELECT output FROM results WHERE prompt_idx = 1")]
    assert outputs and all(o.endswith("to ${FACTCLI_DB}") for o in outputs)  # the URL's password is a secret
    assert "both stores" in cli("list").output
    with pytest.raises(sqlite3.Error):  # nothing went to a SQLite file
        sqlite3.connect(f"file:{tmp_path / 'factcli-home' / 'factcli.db'}?mode=ro", uri=True).execute("SELECT 1")


def test_the_python_api_takes_a_url(pg_url, tmp_path):
    from factcli import evaluate

    run = evaluate(str(write(tmp_path / "c.yaml", ECHO)), db=pg_url)
    with Store.open(pg_url) as store:
        assert store.resolve("latest")["id"] == run.run_id and store.result_count(run.run_id) == 6


def test_the_sqlite_file_is_what_earlier_factcli_wrote(tmp_path):
    """The schema now comes from store/schema.py for both backends; a SQLite file is still exactly
    what factcli wrote before (sqlite_master as captured from the previous code, m001 + m002), with
    m003's one column added to runs as SQLite's ALTER TABLE writes it."""
    from conftest import ROOT

    expected = json.loads((ROOT / "tests" / "sqlite_schema_m002.json").read_text())
    for entry in expected:
        if entry[:2] == ["table", "runs"]:
            assert entry[3].endswith("\n)")
            entry[3] = entry[3][:-1] + ', "gates_json" TEXT)'
    # m004's two tables (batch mode: store/batches.py), as sqlite-utils creates them
    fk = '"run_id" TEXT REFERENCES "runs"("id")'
    expected += [
        ["index", "sqlite_autoindex_batch_lines_1", "batch_lines", None],
        ["index", "sqlite_autoindex_batches_1", "batches", None],
        ["table", "batch_lines", "batch_lines", f'CREATE TABLE "batch_lines" (\n   {fk},\n   "custom_id" TEXT,\n'
         '   "batch_id" TEXT,\n   PRIMARY KEY ("run_id", "custom_id")\n)'],
        ["table", "batches", "batches", f'CREATE TABLE "batches" (\n   {fk},\n' + "".join(
            f'   "{name}" {kind},\n' for name, kind in (
                ("batch_id", "TEXT"), ("kind", "TEXT"), ("endpoint", "TEXT"), ("base_url", "TEXT"),
                ("round", "INTEGER"), ("status", "TEXT"), ("total", "INTEGER"), ("done", "INTEGER"),
                ("failed", "INTEGER"), ("error", "TEXT"), ("created_at", "TEXT"), ("updated_at", "TEXT")))
         + '   PRIMARY KEY ("run_id", "batch_id")\n)'],
    ]
    expected.sort(key=lambda e: (e[0], e[1]))
    with Store.open(tmp_path / "x.db", create=True) as store:
        sql = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        got = [list(r) for r in store.execute(sql)]
    assert got == expected


GRADED = """
prompts: ["Q: {{q}}"]
providers: [{id: "openai:chat:m", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}]
defaultTest: {options: {provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}}}
tests:
  - vars: {q: capital of France}
    assert: [{type: llm-rubric, value: names Paris}, {type: contains, value: Paris}]
  - vars: {q: capital of Spain}
    assert: [{type: llm-rubric, value: names Madrid, metric: right}]
"""


def test_a_model_graded_config_gives_the_same_rows_in_both_stores(pg_url, tmp_path, fake_openai):
    fake_openai.add_rule("France", "Paris.", model="m")
    fake_openai.add_rule("Spain", "Barcelona.", model="m")
    fake_openai.add_rule("Paris", '{"reason": "it names Paris", "pass": true, "score": 1}', model="judge")
    fake_openai.add_rule(".", '{"reason": "Barcelona is not Madrid", "pass": false, "score": 0}', model="judge")
    cfg = write(tmp_path / "g.yaml", GRADED)
    lite = str(tmp_path / "g.db")
    for db in (lite, pg_url):
        assert cli("eval", "-c", cfg, "--db", db, "--no-cache", "--no-progress-bar", "--no-table").exit_code == 100
    rows = _rows(lite)
    assert rows == _rows(pg_url) and len(rows) == 2
    grading = json.loads(rows[1]["grading_json"])
    assert grading["componentResults"][0]["reason"] == "Barcelona is not Madrid" and rows[1]["success"] == 0


def test_a_database_of_someone_else_is_not_touched(pg_url):
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE runs (id TEXT PRIMARY KEY, owner TEXT)")
    result = cli("list", "--db", pg_url)
    assert result.exit_code == 1 and "not a factcli database" in result.output
    with psycopg.connect(pg_url) as conn:
        tables = {r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables "
                                             "WHERE table_schema = 'public'")}
    assert tables == {"runs"}
