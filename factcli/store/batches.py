"""A run's batches at the vendors (run/calling/batches.py): each batch's id, vendor, endpoint, round and last
known status and counts, and the custom_id of every line submitted, committed as soon as the vendor
has the batch, so that a run killed or detached while they run is resumed without submitting a line
twice (`--resume`), and `list`/`show` say what it waits on. Its texts (endpoint, base URL, a vendor's error) go
through the secrets rule by shape (store/redact) as every stored text does."""

from __future__ import annotations

from factcli.store.base import now
from factcli.store.redact import scrub_text

WAITING = ("running",)  # BatchState.state of a batch not yet ended


class BatchJournal:
    """run/calling/batches.Journal on the store: written by the running eval."""

    def __init__(self, store, run_id: str):
        self.store = store
        self.run_id = run_id

    def lines(self) -> dict[str, str]:
        rows = self.store.execute("SELECT custom_id, batch_id FROM batch_lines WHERE run_id = ?", (self.run_id,))
        return {r[0]: r[1] for r in rows}

    def batches(self) -> dict[str, dict]:
        return {b["batch_id"]: b for b in run_batches(self.store, self.run_id)}

    def intent(self, pending: str, kind: str, endpoint: str, round_: int, custom_ids: list[str],
               base_url: str | None = None) -> None:
        store, at = self.store, now()
        store.execute("INSERT INTO batches (run_id, batch_id, kind, endpoint, base_url, round, status, total, done, "
                      "failed, error, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 0, NULL, ?, ?)",
                      (self.run_id, pending, kind, scrub_text(endpoint), scrub_text(base_url) if base_url else None,
                       round_, "submitting", len(custom_ids), at, at))
        store.executemany("INSERT INTO batch_lines (run_id, custom_id, batch_id) VALUES (?, ?, ?)",
                          [(self.run_id, cid, pending) for cid in custom_ids])
        store.commit()

    def adopt(self, pending: str, batch_id: str) -> None:
        store = self.store
        store.execute("UPDATE batches SET batch_id = ?, status = ?, updated_at = ? WHERE run_id = ? AND batch_id = ?",
                      (batch_id, "submitted", now(), self.run_id, pending))
        store.execute("UPDATE batch_lines SET batch_id = ? WHERE run_id = ? AND batch_id = ?",
                      (batch_id, self.run_id, pending))
        store.commit()

    def forget(self, pending: str) -> None:
        self.store.execute("DELETE FROM batch_lines WHERE run_id = ? AND batch_id = ?", (self.run_id, pending))
        self.store.execute("DELETE FROM batches WHERE run_id = ? AND batch_id = ?", (self.run_id, pending))
        self.store.commit()

    def state(self, batch_id: str, state) -> None:
        self.store.execute("UPDATE batches SET status = ?, total = ?, done = ?, failed = ?, error = ?, updated_at = ? "
                           "WHERE run_id = ? AND batch_id = ?",
                           (state.status, state.total, state.done, state.failed,
                            scrub_text(state.error) if state.error else None, now(), self.run_id, batch_id))
        self.store.commit()


def run_batches(store, run_id: str) -> list[dict]:
    """A run's batches, in the order they were submitted."""
    return [dict(r) for r in store.execute("SELECT * FROM batches WHERE run_id = ? ORDER BY created_at, round",
                                           (run_id,))]


def unfinished(store, run_id: str) -> list[dict]:
    """The run's batches not known to have ended (their last status seen by the run)."""
    ended = ("completed", "failed", "expired", "cancelled", "ended")
    return [b for b in run_batches(store, run_id) if b.get("status") not in ended]


def waiting_on(store, run_id: str) -> list[str]:
    """One line per batch of the run, for `list` and `show`: `batch_… (openai, round 2): in_progress 120/400
    done, 3 failed`."""
    out = []
    for b in run_batches(store, run_id):
        failed = f", {b['failed']} failed" if b.get("failed") else ""
        error = f": {b['error']}" if b.get("error") else ""
        out.append(f"{b['batch_id']} ({b['kind']}, round {b['round']}): {b['status']} {b.get('done') or 0}/"
                   f"{b.get('total') or 0} done{failed}{error}")
    return out
