"""`factcli copy RUN… --to DB`: runs with their columns, rows and ratings from one store to another
(SQLite to PostgreSQL and back).

Copying is idempotent: the run row and its columns are upserted on their keys, rows on (run_id,
test_idx, prompt_idx, repeat_idx), and a rating is inserted only when the other store has no rating
of the same row, assertion, rater, verdict, comment and time (a retraction made since is carried
over). Nothing in the destination is deleted. A run that is still running is refused: copy it once
it has finished or been interrupted.
"""

from __future__ import annotations

from factcli.errors import FactcliError
from factcli.store.database import RESULT_FIELDS, Store, shown_status
from factcli.store.leases import holder

BATCH = 1000
_RATING_KEY = ("run_id", "test_idx", "prompt_idx", "repeat_idx", "assertion_idx", "passed", "comment", "rater",
               "created_at")


def same_store(a: Store, b: Store) -> bool:
    if a.kind != b.kind:
        return False
    if a.kind == "sqlite":
        return a.target.resolve() == b.target.resolve()
    return a.path == b.path


def copy_run(src: Store, dst: Store, ref: str) -> dict:
    """Copy one run; returns {id, rows, ratings (newly added)}. Committed at the end."""
    run = src.resolve(ref)
    run_id = run["id"]
    if shown_status(run) == "running":
        raise FactcliError(f"run {run_id} is still running ({holder(run)}); copy it once it has finished")
    try:
        dst.upsert_run(dict(run))
        dst.set_columns(run_id, [{k: v for k, v in c.items() if k != "run_id"} for c in src.columns(run_id)],
                        commit=False)
        rows, batch = 0, []
        for rec in src.results(run_id, order="test_idx, prompt_idx, repeat_idx"):
            batch.append(tuple(rec[f] for f in RESULT_FIELDS))
            if len(batch) >= BATCH:
                dst.write_results(batch)
                rows, batch = rows + len(batch), []
        dst.write_results(batch)
        rows += len(batch)
        added = _copy_ratings(src, dst, run_id)
        dst.commit()
    except BaseException:
        dst.rollback()
        raise
    return {"id": run_id, "rows": rows, "ratings": added}


def _copy_ratings(src: Store, dst: Store, run_id: str) -> int:
    added = 0
    fields = ", ".join(_RATING_KEY)
    same = " AND ".join(f"{k} IS NOT DISTINCT FROM ?" for k in _RATING_KEY)
    for r in [dict(x) for x in src.execute(f"SELECT {fields}, retracted_at FROM ratings WHERE run_id = ? ORDER BY id",
                                          (run_id,))]:
        key = [r[k] for k in _RATING_KEY]
        found = dst.execute(f"SELECT id, retracted_at FROM ratings WHERE {same} LIMIT 1", key).fetchone()
        if found is None:
            dst.execute(f"INSERT INTO ratings ({fields}, retracted_at) VALUES ({', '.join('?' * (len(key) + 1))})",
                        [*key, r["retracted_at"]])
            added += 1
        elif r["retracted_at"] and not found["retracted_at"]:
            dst.execute("UPDATE ratings SET retracted_at = ? WHERE id = ?", (r["retracted_at"], found["id"]))
    return added
