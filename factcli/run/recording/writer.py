"""A run's rows into the store as they finish: each queued as the tuple the store takes
(store/records.RowEncoder), committed in groups, with the run's running totals once a second; a store
that stops taking rows mid-run (run/recording/outage.py) has them held and tried again, and one gone
for good leaves every row in memory for the table and the -o files.
"""

from __future__ import annotations

import asyncio
import json
import time

from factcli.errors import FactcliError
from factcli.run.recording.record import totals
from factcli.store.database import now, store_errors
from factcli.store.records import RowEncoder, from_record, metrics_to_json
from factcli.store.schema import RESULT_FIELDS

METRICS_EVERY_S = 1.0  # column metrics are refreshed this often while a run writes
# Rows are committed in groups (a commit per row was a third of a stored echo run's time): a group
# is committed once it has GROUP_ROWS rows or GROUP_S seconds after its first row, whichever comes
# first, so a SIGKILL loses at most that much (docs/commands.md, "Crashes and --resume").
GROUP_ROWS = 500
GROUP_S = 0.1


class RowWriter:
    def __init__(self, store, run, scrub, ui) -> None:
        self.store, self.run, self.scrub, self.ui = store, run, scrub, ui
        self.encoder = RowEncoder(scrub)  # makes the rows the store takes (and keeps their texts)
        self.writing = True  # False once the store is gone for good (_wait_for_store)
        self.seq = 0  # the last row's number (a resumed run goes on from its stored rows')
        # rows written but not yet committed (write / flush), as the store takes them: a group's
        # finished rows are let go as soon as they are recorded, not 500 rows later (holding them cost
        # time: they were freed, cold, at each flush); a group the store fails to take is read
        # back from these tuples as the store would give them (_hold_rows)
        self._group: list[tuple] = []
        self._timer = None  # the event loop's call to flush(), GROUP_S after a group's first row
        self._metrics_at = time.monotonic()  # the first running totals a second in: a short run has only its final ones
        self._outage = None  # run/recording/outage.Outage while the store does not take rows
        self.unstorable: list[tuple[str, str]] = []  # (row's place, why): rows the store refused for good
        # the rows a store that may vanish (a server) took, to show them if it is gone at the end
        self._kept = None  # run/recording/outage.Spool for a server store
        if store.kind == "postgresql":
            from factcli.run.recording.outage import Spool

            self._kept = Spool()
        self.unstored: tuple | None = None  # (rows, tests, error): the store was gone at the end

    def stream_rows(self) -> None:
        """From here on the run's rows live in the store, not in memory (EvalRun.keep)."""
        from factcli.store.records import StoredRows

        self.run.stored_rows = StoredRows(self.store.target, self.run.run_id, self.run.columns, flush=self.flush)

    def write(self, result) -> None:
        """Queue a finished row for the store. Rows are committed in groups, at most GROUP_ROWS rows
        or GROUP_S seconds after the group's first row (a timer on the running event loop), and at
        the end, also after Ctrl-C, an error or the budget: a SIGKILL loses at most the last group,
        which --resume runs again (from the response cache)."""
        if not self.writing:
            return
        self.queue(result)
        if len(self._group) >= GROUP_ROWS:
            self.flush()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop to wake us: write it now
                self.flush()
                return
            self._timer = loop.call_later(GROUP_S, self.flush)

    def queue(self, result) -> None:
        self.seq += 1
        self._group.append(self.encoder.row(self.run.run_id, result, self.seq))

    def flush(self) -> None:
        """Write and commit the queued rows (and, once a second, the run's running totals). A group
        stays queued until it is committed (a Ctrl-C inside the write: drain() writes it again).
        While the store is out (run/recording/outage.py) the group is held and the store tried again when due."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        group = self._group
        if not self.writing or (not group and self._outage is None):
            self._group = []
            return
        if self._outage is not None:
            self._outage.hold(group)
            self._group = []
            if self._outage.due():
                self._reconnect()
            return
        try:
            self.store.write_results(group)
            if time.monotonic() - self._metrics_at >= METRICS_EVERY_S:
                self._metrics_at = time.monotonic()
                self.store.set_column_metrics(self.run.run_id,
                                              [metrics_to_json(m, self.scrub) for m in self.run.metrics],
                                              commit=False)
                tokens, cost = totals(self.run)
                self.store.update_run(self.run.run_id, {"updated_at": now(), "tokens_json": json.dumps(tokens),
                                                        "cost": cost}, commit=False)
            self.store.commit()
        except store_errors() as exc:
            from factcli.run.recording.outage import permanent

            if permanent(exc):
                self._one_by_one(group)
            else:
                self._lost(exc, group)
        else:
            if self._kept is not None:
                self._kept.add(group)
        self._group = []

    def drain(self) -> None:
        """At the end of the run: the last group written; a store that is out waited for."""
        self.flush()
        if self._outage is not None:
            self._wait_for_store()

    def close(self) -> None:
        if self._kept is not None:
            self._kept.close()

    def _one_by_one(self, group: list[tuple]) -> list[tuple]:
        """A group the store refused for a row's sake (outage.permanent): each row written alone, the
        rows it cannot take reported and left out, the others stored; a failure that is the store's
        holds the rest as an outage. Returns the rows left out."""
        from factcli.run.recording.outage import describe, permanent, place

        refused = []
        try:
            self.store.rollback()
        except store_errors():
            pass
        for i, row in enumerate(group):
            try:
                self.store.write_results([row])
                self.store.commit()
            except store_errors() as exc:
                try:
                    self.store.rollback()
                except store_errors():
                    pass
                if not permanent(exc):
                    self._lost(exc, group[i:])
                    break
                refused.append(row)
                self.unstorable.append((place(row), describe(exc)))
                self.ui.warn(f"{self.store.path} cannot store the row of {place(row)}: {describe(exc)}; the "
                             "run's other rows are stored")
            else:
                if self._kept is not None:
                    self._kept.add([row])
        return refused

    def _lost(self, exc: BaseException, group: list[tuple]) -> None:
        """The store failed to take `group`: hold it, and go on holding rows until the store takes them
        again (run/recording/outage.py)."""
        from factcli.run.recording.outage import Outage, announce

        if self._outage is None:
            self._outage = Outage(exc)
            self.ui.warn(announce(self.store.path, exc))
        self._outage.hold(group)

    def _reconnect(self) -> bool:
        """Try the store again: a new connection, then every held row in one go. True if it took them."""
        outage = self._outage
        rows = outage.rows()
        try:
            self.store.reopen()
            self.store.write_results(rows)
            self.store.commit()
        except store_errors() as exc:
            from factcli.run.recording.outage import permanent

            if not permanent(exc):
                outage.failed(exc)
                return False
            self._outage = None  # the store is back; a row of those held is what it refuses
            self._one_by_one(rows)
            if self._outage is not None:
                return False
            self.ui.note(f"{self.store.path} is back: the rows held meanwhile are stored.")
            return True
        if self._kept is not None:
            self._kept.add(rows)
        self._outage = None
        self.ui.note(f"{self.store.path} is back: the {len(rows)} rows held meanwhile are stored.")
        return True

    def _wait_for_store(self) -> None:
        """The run ended while the store is out: try it until the outage's time is up (once more
        if it already is); then keep every row in memory and record what the store lacks."""
        from factcli.run.recording.outage import describe, missing_tests

        outage = self._outage
        if outage.remaining() > 0:
            self.ui.note(f"waiting up to {outage.remaining():.0f} s for {self.store.path} to come back "
                  f"({len(outage.rows())} rows to store)…")
        try:
            while not self._reconnect():
                if outage.remaining() <= 0:
                    break
                outage.wait()
        except KeyboardInterrupt:  # Ctrl-C while waiting: stop waiting, keep the rows
            pass
        if self._outage is None:
            return
        rows = outage.rows()
        self.writing = False
        self._outage = None
        self.unstored = (len(rows), missing_tests(rows), describe(outage.error))
        self.ui.warn(f"could not write to {self.store.path} ({describe(outage.error)}); the rest of this run is not stored")
        self._hold_rows(self._unwritten(rows))

    def _unwritten(self, group: list[tuple]) -> list:
        """The rows of a group the store failed to take, as it would have given them back (the rows
        it did take are read back the same way: records.StoredRows)."""
        return [from_record(dict(zip(RESULT_FIELDS, row)), self.run.columns) for row in group]

    def _hold_rows(self, unwritten: list) -> None:
        """The store is gone for good: every row of the run in memory, so that the table and the result
        files still show every row: the rows it had (kept from the writes of a store that may vanish,
        else read back) and those it failed to take; the rows still to come stay in memory."""
        run = self.run
        stored, run.stored_rows = run.stored_rows, None
        if stored is None:
            return
        held = {(r.step.test_idx, r.step.prompt_idx, r.step.repeat_idx) for r in run.rows}
        try:
            for r in (self._unwritten(self._kept.rows()) if self._kept is not None else stored):
                key = (r.step.test_idx, r.step.prompt_idx, r.step.repeat_idx)
                if key not in held:
                    held.add(key)
                    run.rows.append(r)
        except (*store_errors(), FactcliError) as exc:
            self.ui.warn(f"could not read back the rows already stored ({exc}); they are in {self.store.path} "
                  "but missing from this run's table and result files")
        for r in unwritten:
            if (r.step.test_idx, r.step.prompt_idx, r.step.repeat_idx) not in held:
                run.rows.append(r)
