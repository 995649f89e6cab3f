"""People's ratings (store/ratings.py, web/ratings.py, cli/ratings.py) and what they measure:
the store and its migration, the HTTP endpoints, the marks in show/view/exports, `ratings export`
read back by calibrate's loader, and `calibrate --ratings` against hand-computed figures."""

import sqlite3

import pytest
from conftest import write
from typer.testing import CliRunner

from factcli.cli import app
from factcli.errors import FactcliError
from factcli.store import ratings as R
from factcli.store.database import MIGRATION_NAMES, Store

runner = CliRunner()


def cli(*args, env=None):
    return runner.invoke(app, [*map(str, args)], env=env)


ECHO = """
description: ratings test
prompts: ["Say {{word}}", "Shout {{word}}"]
providers: [echo]
tests:
  - vars: {word: hello}
    assert: [{type: contains, value: hello}]
  - vars: {word: bye}
    assert: [{type: contains, value: hello}]
"""


@pytest.fixture
def echo_run(tmp_path):
    """A stored run of 2 tests x 2 columns (test 0 passes, test 1 fails); -> (db path, run id)."""
    db = tmp_path / "r.db"
    result = cli("eval", "--no-progress-bar", "--no-table", "-c", write(tmp_path / "c.yaml", ECHO), "--db", db)
    assert result.exit_code == 100, result.output
    with Store.open(db) as store:
        return db, store.resolve(None)["id"]


# ---------------------------------------------------------------- the store


def test_add_list_retract(echo_run):
    db, run = echo_run
    with Store.open(db) as store:
        before = [dict(r) for r in store.conn.execute("SELECT * FROM results ORDER BY id")]
        a = R.add_rating(store, run, test_idx=1, prompt_idx=0, passed=True, comment=" fine by me ", rater="ann")
        b = R.add_rating(store, run, test_idx=1, prompt_idx=0, passed=False, rater="bob")
        c = R.add_rating(store, run, test_idx=1, prompt_idx=0, assertion_idx=0, passed=True)
        rows = R.ratings_for_row(store, run, 1, 0)
        assert [r["id"] for r in rows] == [c, b, a]  # newest first
        assert rows[2] | {"createdAt": None} == {
            "id": a, "runId": run, "testIdx": 1, "promptIdx": 0, "repeatIdx": 0, "assertionIdx": None,
            "passed": True, "comment": "fine by me", "rater": "ann", "createdAt": None, "retractedAt": None}
        assert R.rated_rows(store, run) == {(1, 0, 0): False}  # the latest row-level verdict
        assert R.retract_rating(store, b) is True
        assert R.retract_rating(store, b) is False  # already taken back
        assert R.retract_rating(store, 999) is False
        assert R.rated_rows(store, run) == {(1, 0, 0): True}
        assert [r["id"] for r in R.ratings_for_run(store, run)] == [a, c]  # in force only
        retracted = next(r for r in R.ratings_for_row(store, run, 1, 0) if r["id"] == b)
        assert retracted["retractedAt"] is not None  # kept, marked
        # the stored grading never changes
        assert [dict(r) for r in store.conn.execute("SELECT * FROM results ORDER BY id")] == before
        assert R.judge_agreement(store, run) == {"agree": 0, "rated": 0, "rates": R.judge_agreement(store, run)["rates"],
                                                 "disagreements": []}  # contains is not model-graded


@pytest.mark.parametrize("where, needle", [
    ({"run_id": "nope"}, "no run 'nope'"),
    ({"test_idx": 7}, "has no row test 7"),
    ({"prompt_idx": 2}, "column 2"),
    ({"repeat_idx": 1}, "repeat 1"),
    ({"assertion_idx": 1}, "has no assertion 1"),
])
def test_unknown_run_row_or_assertion(echo_run, where, needle):
    db, run = echo_run
    args = {"run_id": run, "test_idx": 0, "prompt_idx": 0, **where}
    with Store.open(db) as store:
        with pytest.raises(FactcliError, match=needle):
            R.add_rating(store, args.pop("run_id"), passed=True, **args)
        assert store.conn.execute("SELECT COUNT(*) FROM ratings").fetchone()[0] == 0


def test_an_existing_database_upgrades_in_place(echo_run):
    db, run = echo_run
    # make it a database written before ratings existed (m001 only)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE ratings")
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm002_ratings'")
        results = conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    result = cli("list", "--db", db)  # a read command upgrades it
    assert result.exit_code == 0 and run in result.output, result.output
    with Store.open(db) as store:
        applied = [r[0] for r in store.conn.execute("SELECT name FROM _sqlite_migrations ORDER BY id")]
        assert tuple(applied) == MIGRATION_NAMES and MIGRATION_NAMES[-1] == "m002_ratings"
        assert store.conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == results
        assert R.add_rating(store, run, test_idx=0, prompt_idx=1, passed=True) == 1


def test_deleting_a_run_deletes_its_ratings(echo_run):
    db, run = echo_run
    with Store.open(db) as store:
        R.add_rating(store, run, test_idx=0, prompt_idx=0, passed=True)
        store.delete_run(run)
        assert store.conn.execute("SELECT COUNT(*) FROM ratings").fetchone()[0] == 0
