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


# ---------------------------------------------------------------- the HTTP endpoints


@pytest.fixture
def client(echo_run):
    from starlette.testclient import TestClient

    from factcli.web.app import create_app

    db, run = echo_run
    with TestClient(create_app(db, token="s3cret"), follow_redirects=False) as c:
        c.run_id, c.db = run, db
        yield c


def _count(db) -> int:
    with Store.open(db) as store:
        return store.conn.execute("SELECT COUNT(*) FROM ratings").fetchone()[0]


@pytest.mark.parametrize("how", ["none", "wrong-field", "wrong-header", "empty"])
def test_a_rating_without_the_token_is_refused(client, how):
    body = {"test_idx": 0, "prompt_idx": 0, "verdict": "pass"}
    headers = {}
    if how == "wrong-field":
        body["token"] = "guess"
    elif how == "wrong-header":
        headers["X-Factcli-Token"] = "guess"
    elif how == "empty":
        body["token"] = ""
    r = client.post(f"/api/runs/{client.run_id}/ratings", json=body, headers=headers)
    assert r.status_code == 403 and "token" in r.json()["error"]
    r = client.post(f"/api/runs/{client.run_id}/ratings", data={k: str(v) for k, v in body.items()}, headers=headers)
    assert r.status_code == 403 and "Traceback" not in r.text and "<h1>Forbidden</h1>" in r.text
    assert _count(client.db) == 0
    rid = _add_direct(client)
    assert client.post(f"/api/ratings/{rid}/retract", json={k: v for k, v in body.items() if k == "token"},
                       headers=headers).status_code == 403
    with Store.open(client.db) as store:
        assert R.get_rating(store, rid)["retractedAt"] is None


def _add_direct(client) -> int:
    with Store.open(client.db) as store:
        return R.add_rating(store, client.run_id, test_idx=0, prompt_idx=0, passed=True)


def test_json_flow(client):
    run = client.run_id
    r = client.post(f"/api/runs/{run}/ratings", json={
        "test_idx": 1, "prompt_idx": 1, "assertion_idx": 0, "verdict": "pass", "comment": "<b>ok</b>",
        "rater": "ann", "token": "s3cret"})
    assert r.status_code == 201, r.text
    got = r.json()
    assert got["id"] == 1 and got["passed"] is True and got["assertionIdx"] == 0 and got["comment"] == "<b>ok</b>"
    assert (got["testIdx"], got["promptIdx"], got["repeatIdx"], got["rater"]) == (1, 1, 0, "ann")
    r = client.post(f"/api/runs/{run}/ratings", json={"test_idx": "1", "prompt_idx": 1, "verdict": "FAIL"},
                    headers={"X-Factcli-Token": "s3cret"})
    assert r.status_code == 201 and r.json()["passed"] is False and r.json()["assertionIdx"] is None
    r = client.post("/api/ratings/2/retract", json={"token": "s3cret"})
    assert r.status_code == 200 and r.json()["retracted"] is True
    with Store.open(client.db) as store:
        assert [x["id"] for x in R.ratings_for_run(store, run)] == [1]


def test_form_flow_redirects_to_next(client):
    run = client.run_id
    nxt = f"/runs/{run}/cell/1/0/0"
    r = client.post(f"/api/runs/{run}/ratings", data={
        "test_idx": "1", "prompt_idx": "0", "repeat_idx": "0", "assertion_idx": "", "verdict": "fail",
        "comment": "wrong", "rater": "bob", "token": "s3cret", "next": nxt})
    assert r.status_code == 303 and r.headers["location"] == nxt
    # `next` only ever points at this server
    r = client.post(f"/api/runs/{run}/ratings", data={"test_idx": "1", "prompt_idx": "0", "verdict": "pass",
                                                      "token": "s3cret", "next": "//evil.example/x"})
    assert r.status_code == 303 and r.headers["location"] == nxt
    r = client.post("/api/ratings/1/retract", data={"token": "s3cret", "next": nxt + "#ratings"})
    assert r.status_code == 303 and r.headers["location"] == nxt + "#ratings"
    with Store.open(client.db) as store:
        rows = R.ratings_for_row(store, run, 1, 0)
        assert [(x["id"], x["passed"], x["retractedAt"] is None) for x in rows] == [(2, True, True), (1, False, False)]
        assert rows[1]["comment"] == "wrong" and rows[1]["rater"] == "bob"


@pytest.mark.parametrize("path, body, status, needle", [
    ("/api/runs/nope/ratings", {"test_idx": 0, "prompt_idx": 0, "verdict": "pass"}, 404, "no run 'nope'"),
    ("/api/runs/{run}/ratings", {"test_idx": 5, "prompt_idx": 0, "verdict": "pass"}, 404, "no row test 5"),
    ("/api/runs/{run}/ratings", {"test_idx": 0, "prompt_idx": 0, "assertion_idx": 3, "verdict": "pass"}, 404,
     "no assertion 3"),
    ("/api/ratings/99/retract", {}, 404, "no rating 99"),
    ("/api/ratings/abc/retract", {}, 404, "no rating 'abc'"),
    ("/api/runs/{run}/ratings", {"test_idx": 0, "prompt_idx": 0, "verdict": "maybe"}, 400, "verdict"),
    ("/api/runs/{run}/ratings", {"test_idx": -1, "prompt_idx": 0, "verdict": "pass"}, 400, "test_idx"),
    ("/api/runs/{run}/ratings", {"prompt_idx": 0, "verdict": "pass"}, 400, "test_idx is missing"),
    ("/api/runs/{run}/ratings", {"test_idx": "x", "prompt_idx": 0, "verdict": "pass"}, 400, "whole number"),
])
def test_bad_requests(client, path, body, status, needle):
    path = path.format(run=client.run_id)
    r = client.post(path, json={**body, "token": "s3cret"})
    assert r.status_code == status and needle in r.json()["error"], r.text
    r = client.post(path, data={**{k: str(v) for k, v in body.items()}, "token": "s3cret"})
    assert r.status_code == status and needle in html_unescape(r.text) and "Traceback" not in r.text
    assert _count(client.db) == 0


def html_unescape(text: str) -> str:
    import html

    return html.unescape(text)


def test_bad_bodies(client):
    run = client.run_id
    assert client.post(f"/api/runs/{run}/ratings", content=b"{nope", headers={
        "content-type": "application/json", "X-Factcli-Token": "s3cret"}).status_code == 400
    assert client.post(f"/api/runs/{run}/ratings", content=b"[1]", headers={
        "content-type": "application/json", "X-Factcli-Token": "s3cret"}).status_code == 400
    assert client.get(f"/api/runs/{run}/ratings").status_code == 405
