"""People's ratings of stored rows: a pass/fail verdict on a whole row or on one of its assertions,
with an optional comment and rater name. They live in their own `ratings` table (migration
`m002_ratings`) and never change the stored grading; taking one back marks it retracted, so the
history stays.

Also here, because every reader needs the same pairing: how a row's model-graded verdicts line up
with the people's (`comparisons`), the calibration report and the web run page's agreement line
are both built from it.

`assertion_idx` is the position of the assertion in the row's stored grading (its top-level
`componentResults`, which is the test's `assert` list); NULL rates the whole row.
"""

from __future__ import annotations

import json

from factcli.errors import FactcliError
from factcli.scoring.outcome import json_errored
from factcli.store.database import Store, now
from factcli.types import json_components, json_walk

_FIELDS = ("id, run_id, test_idx, prompt_idx, repeat_idx, assertion_idx, passed, comment, rater, created_at, "
           "retracted_at")


class RatingNotFound(FactcliError):
    """An unknown run, row, assertion or rating (the web answers 404)."""


def _as_dict(r) -> dict:
    return {"id": r["id"], "runId": r["run_id"], "testIdx": r["test_idx"], "promptIdx": r["prompt_idx"],
            "repeatIdx": r["repeat_idx"], "assertionIdx": r["assertion_idx"], "passed": bool(r["passed"]),
            "comment": r["comment"], "rater": r["rater"], "createdAt": r["created_at"],
            "retractedAt": r["retracted_at"]}


def _row(store: Store, run_id: str, test_idx: int, prompt_idx: int, repeat_idx: int):
    if store.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
        raise RatingNotFound(f"no run '{run_id}' in {store.path}")
    row = store.execute(
        "SELECT grading_json FROM results WHERE run_id = ? AND test_idx = ? AND prompt_idx = ? AND repeat_idx = ?",
        (run_id, test_idx, prompt_idx, repeat_idx)).fetchone()
    if row is None:
        raise RatingNotFound(f"run {run_id} has no row test {test_idx}, column {prompt_idx}, repeat {repeat_idx}")
    return row


def _components(grading_json: str | None) -> list[dict]:
    try:
        grading = json.loads(grading_json) if grading_json else None
    except ValueError:
        return []
    return json_components(grading)


def _text(value, name: str, limit: int) -> str | None:
    if value is None:
        return None
    value = str(value).strip()
    if len(value) > limit:
        raise FactcliError(f"the {name} is longer than {limit} characters")
    return value or None


def add_rating(store: Store, run_id: str, *, test_idx: int, prompt_idx: int, repeat_idx: int = 0,
               assertion_idx: int | None = None, passed: bool, comment: str | None = None,
               rater: str | None = None) -> int:
    """Store a verdict; returns its id. An unknown run, row or assertion is a RatingNotFound."""
    row = _row(store, run_id, test_idx, prompt_idx, repeat_idx)
    if assertion_idx is not None:
        n = len(_components(row["grading_json"]))
        if not 0 <= assertion_idx < n:
            raise RatingNotFound(f"row test {test_idx}, column {prompt_idx} has no assertion {assertion_idx} "
                                 f"({n} assertions)")
    new_id = store.execute(
        "INSERT INTO ratings (run_id, test_idx, prompt_idx, repeat_idx, assertion_idx, passed, comment, rater, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (run_id, test_idx, prompt_idx, repeat_idx, assertion_idx, int(bool(passed)),
         _text(comment, "comment", 10_000), _text(rater, "rater name", 200), now())).fetchone()[0]
    store.commit()
    return new_id


def get_rating(store: Store, rating_id: int) -> dict | None:
    r = store.execute(f"SELECT {_FIELDS} FROM ratings WHERE id = ?", (rating_id,)).fetchone()
    return None if r is None else _as_dict(r)


def retract_rating(store: Store, rating_id: int) -> bool:
    """Take a rating back (kept, marked retracted). False when there is no such rating in force."""
    n = store.execute("UPDATE ratings SET retracted_at = ? WHERE id = ? AND retracted_at IS NULL",
                           (now(), rating_id)).rowcount
    store.commit()
    return n > 0


def ratings_for_row(store: Store, run_id: str, test_idx: int, prompt_idx: int, repeat_idx: int = 0) -> list[dict]:
    """Every rating of a row, in force and retracted, newest first."""
    return [_as_dict(r) for r in store.execute(
        f"SELECT {_FIELDS} FROM ratings WHERE run_id = ? AND test_idx = ? AND prompt_idx = ? AND repeat_idx = ? "
        "ORDER BY created_at DESC, id DESC", (run_id, test_idx, prompt_idx, repeat_idx))]


def ratings_for_run(store: Store, run_id: str) -> list[dict]:
    """The ratings in force of a run, in row order, oldest first within a row."""
    return [_as_dict(r) for r in store.execute(
        f"SELECT {_FIELDS} FROM ratings WHERE run_id = ? AND retracted_at IS NULL "
        "ORDER BY test_idx, prompt_idx, repeat_idx, created_at, id", (run_id,))]


def ratings_by_row(store: Store, run_id: str) -> dict[tuple[int, int, int], list[dict]]:
    """(test_idx, prompt_idx, repeat_idx) -> the row's ratings in force, oldest first (for exports)."""
    out: dict[tuple[int, int, int], list[dict]] = {}
    for r in ratings_for_run(store, run_id):
        out.setdefault((r["testIdx"], r["promptIdx"], r["repeatIdx"]), []).append(r)
    return out


def rated_rows(store: Store, run_id: str) -> dict[tuple[int, int, int], bool]:
    """Each row's latest row-level verdict in force (for `view` marks and the web matrix)."""
    out: dict[tuple[int, int, int], bool] = {}
    for r in ratings_for_run(store, run_id):
        if r["assertionIdx"] is None:
            out[(r["testIdx"], r["promptIdx"], r["repeatIdx"])] = r["passed"]  # oldest first: the latest wins
    return out


def latest_per_rater(ratings: list[dict]) -> dict[tuple[str, int | None], dict]:
    """One row's ratings in force -> (rater, assertion_idx) -> the latest. An unnamed rater is ''."""
    out: dict[tuple[str, int | None], dict] = {}
    for r in sorted(ratings, key=lambda r: (r["createdAt"], r["id"])):
        if r["retractedAt"] is None:
            out[(r["rater"] or "", r["assertionIdx"])] = r
    return out


# ---------------------------------------------------------------- the judge against the people


def _model_graded(component: dict) -> str | None:
    """The assertion type when the component is a model-graded assertion's verdict, else None."""
    from factcli.scoring.registry import lookup

    a = component.get("assertion")
    kind_name = a.get("type") if isinstance(a, dict) else None
    if not isinstance(kind_name, str):
        return None
    kind = lookup(kind_name.removeprefix("not-"))
    return kind_name if kind is not None and kind.model_graded else None


def judged(components: list[dict]) -> list[tuple[int, dict]]:
    """(top-level index, component) of every model-graded verdict of a row, inside assert-sets too."""
    out = []
    for i, c in enumerate(components):
        for item in [c, *json_walk(c)]:
            if _model_graded(item):
                out.append((i, item))
    return out


def _grader_of(assertion: dict, default: str | None) -> str | None:
    provider = assertion.get("provider")
    if isinstance(provider, dict) and isinstance(provider.get("id"), str):
        return provider["id"]
    return provider if isinstance(provider, str) else default


def comparisons(store: Store, run_id: str, default_grader: str | None = None) -> tuple[list[dict], list[dict]]:
    """Pair each rater's latest verdict with the judge's: -> (pairs, grading errors).

    A rating of one assertion compares with that assertion's verdict (when it is model-graded); a
    rating of the whole row with every model-graded verdict of the row that the rater did not rate
    on its own. A judge reply that could not be used (graderError) is no prediction; it is listed
    apart. Each pair: testIdx, promptIdx, repeatIdx, assertionIdx, type, grader (the assertion's own
    provider, else `default_grader`), rubricPrompt, judge, people, rater, ratingId."""
    by_row = ratings_by_row(store, run_id)
    pairs: list[dict] = []
    errors: list[dict] = []
    for (t, p, rep), ratings in sorted(by_row.items()):
        row = store.execute(
            "SELECT grading_json, failure_reason FROM results WHERE run_id = ? AND test_idx = ? AND prompt_idx = ? "
            "AND repeat_idx = ?", (run_id, t, p, rep)).fetchone()
        if row is None:
            continue
        verdicts = judged(_components(row["grading_json"]))
        latest = latest_per_rater(ratings)
        for (rater, a_idx), rating in latest.items():
            for i, comp in verdicts:
                if a_idx is not None and i != a_idx:
                    continue
                if a_idx is None and (rater, i) in latest:
                    continue  # this rater rated that assertion on its own
                a = comp.get("assertion") or {}
                base = {"testIdx": t, "promptIdx": p, "repeatIdx": rep, "assertionIdx": i, "type": a.get("type"),
                        "grader": _grader_of(a, default_grader), "rubricPrompt": a.get("rubricPrompt"),
                        "rater": rater, "ratingId": rating["id"], "people": rating["passed"]}
                if json_errored(comp):
                    errors.append({**base, "reason": comp.get("reason") or "grading error"})
                else:
                    pairs.append({**base, "judge": bool(comp.get("pass"))})
    return pairs, errors


def judge_agreement(store: Store, run_id: str) -> dict | None:
    """For the run page: how often the judge agrees with the raters. None when the run has no
    rating in force. `agree`/`rated`: rows where every pair agrees / rows with a pair (a row rated
    only where no model-graded verdict exists is not counted); `rates`: binary_metrics over all
    pairs (positive = pass); `disagreements`: the pairs that differ."""
    from factcli.stats.agreement import binary_metrics

    if store.execute("SELECT 1 FROM ratings WHERE run_id = ? AND retracted_at IS NULL LIMIT 1",
                          (run_id,)).fetchone() is None:
        return None
    pairs, _ = comparisons(store, run_id)
    rows: dict[tuple[int, int, int], bool] = {}
    for x in pairs:
        key = (x["testIdx"], x["promptIdx"], x["repeatIdx"])
        rows[key] = rows.get(key, True) and x["judge"] == x["people"]
    tp = sum(x["judge"] and x["people"] for x in pairs)
    fn = sum(not x["judge"] and x["people"] for x in pairs)
    fp = sum(x["judge"] and not x["people"] for x in pairs)
    tn = sum(not x["judge"] and not x["people"] for x in pairs)
    return {"agree": sum(rows.values()), "rated": len(rows), "rates": binary_metrics(tp, fn, fp, tn),
            "disagreements": [{k: x[k] for k in ("testIdx", "promptIdx", "repeatIdx", "assertionIdx", "type",
                                                 "rater", "judge", "people")}
                              for x in pairs if x["judge"] != x["people"]]}
