"""The store's side of `factcli eval`, as the flow drives it: one object over the parts that do the work,
so that the flow (run/flow.py) and calibrate (run/calibrate.py) hold one thing from the first stage to
the last:
    session = EvalSession.open(options)   # run/recording/source: may rebuild a stored run's suite: session.options
    session.filter_suite(suite)           # --filter-failing (source)
    session.begin(run)                    # opens the store; the run row (record.insert), or resume.resume
    on_result = session.recorder(progress.advance)   # each row to the writer (run/recording/writer)
    session.finish(run)                   # the last rows, then record.finish: final status, totals, metrics
"""

from __future__ import annotations

from pathlib import Path

from factcli.errors import FactcliError
from factcli.run.recording import record
from factcli.run.recording.resume import resume
from factcli.run.recording.source import Source
from factcli.run.recording.writer import RowWriter
from factcli.store import leases
from factcli.store.database import Store, store_errors
from factcli.store.redact import Scrubber


class StderrUI:
    """How a session talks to its user when no flow gives it a UI (run/flow.FlowUI): on stderr."""

    def note(self, message: str) -> None:
        from factcli.report.summary import print_note

        print_note(message)

    def warn(self, message: str) -> None:
        from factcli.report.summary import print_warning

        print_warning(message)


class EvalSession:
    source_class = Source  # calibrate's session rebuilds its suite and records its options its own way

    def __init__(self, source: Source) -> None:
        self.source = source
        self.writer = None  # run/recording/writer.RowWriter, from begin() on, when the run is stored
        self.run = None
        self.heartbeat = None  # store/leases.py: refreshes the run's lease (every store)
        self.finished = False

    @classmethod
    def open(cls, options, ui=None) -> "EvalSession":
        """`options`: run/options.EvalOptions; a resumed or retried run's replace them (session.options)."""
        return cls(cls.source_class.open(options, ui or StderrUI()))

    # ------------------------------------------------------------ what the flow reads

    @property
    def options(self):
        return self.source.options

    @property
    def suite(self):
        """A resumed or retried run's suite, rebuilt from the store; else None."""
        return self.source.suite

    @property
    def source_options(self) -> dict:
        return self.source.stored_options

    @property
    def store(self):
        """The run's store once begin() opened it (None: not stored, or not begun)."""
        return self.source.store

    @property
    def writing(self) -> bool:
        return self.writer.writing if self.writer is not None else self.source.writing

    @property
    def unstored(self) -> tuple | None:
        return self.writer.unstored if self.writer is not None else None

    @property
    def unstorable(self) -> list:
        return self.writer.unstorable if self.writer is not None else []

    def outputs(self, given) -> list[Path]:
        return self.source.outputs(given)

    def filter_suite(self, suite) -> None:
        self.source.filter_suite(suite)

    def select_tests(self, suite) -> None:
        self.source.select_tests(suite)

    # ------------------------------------------------------------ the run

    def begin(self, run) -> None:
        source = self.source
        self.run = run
        if not source.writing:
            return
        if source.store is None:
            source.store = Store.open(source.options.db, create=True)
        store = source.store
        self.writer = RowWriter(store, run, Scrubber(run.suite.raw), source.ui)
        try:
            if source.row is not None:
                resume(run, source, self.writer)
            else:
                record.insert(store, run, self.writer.scrub, source.options_record(run))
                self.writer.stream_rows()
            self.heartbeat = leases.heartbeat(store, run.run_id)
        except store_errors() as exc:
            raise FactcliError(f"{store.path}: cannot write the run: {exc} "
                               "(--db FILE stores runs elsewhere; --no-write does not store them)") from None

    def recorder(self, forward=None):
        """The on_result callback: forward (progress bar), then write the row (committed with its group)."""
        writer = self.writer

        def on_result(result) -> None:
            if forward is not None:
                forward(result)
            if writer is not None:
                writer.write(result)

        return on_result

    def finish(self, run, error: BaseException | None = None) -> None:
        """Final status, totals and column metrics; also after Ctrl-C, an abort or an error."""
        store, writer = self.source.store, self.writer
        if self.finished or store is None:
            return
        self.finished = True
        if self.heartbeat is not None:
            self.heartbeat.stop()
        try:
            if writer is not None:
                writer.drain()
                if writer.writing:
                    record.finish(store, run, writer, self.source.row, error)
        except store_errors() as exc:
            self.source.ui.warn(f"could not finish the run in {store.path}: {exc}")
        finally:
            if writer is not None:
                writer.close()
            try:
                store.close()
            except store_errors():
                pass
