"""The store's side of `factcli eval`: record a run row by row, resume it, retry its errors, and
re-run the tests another run failed.

run/flow.py drives it:
    session = EvalSession.open(options)         # may rebuild the suite of a stored run: session.options
    session.filter_suite(suite)                 # --filter-failing
    session.begin(run)                          # opens the store; run row (status started); resume: skip finished steps
    on_result = session.recorder(progress.advance)
    session.finish(run)                         # final status, totals, metrics
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from pathlib import Path

from factcli.errors import FactcliError
from factcli.scoring.registry import COMPARING, compares
from factcli.settings import VERSION
from factcli.store import leases
from factcli.store.database import Store, now, shown_status, store_errors
from factcli.store.encode import loads
from factcli.store.records import RowEncoder, column_record, from_record, metrics_to_json
from factcli.store.redact import REDACTED, Scrubber
from factcli.store.schema import RESULT_FIELDS
from factcli.types import ERROR_REASONS, test_key

METRICS_EVERY_S = 1.0  # column metrics are refreshed this often while a run writes
# Rows are committed in groups (a commit per row was a third of a stored echo run's time): a group
# is committed once it has GROUP_ROWS rows or GROUP_S seconds after its first row, whichever comes
# first, so a SIGKILL loses at most that much (docs/commands.md, "Crashes and --resume").
GROUP_ROWS = 500
GROUP_S = 0.1


class StderrUI:
    """How a session talks to its user when no flow gives it a UI (run/flow.FlowUI): on stderr."""

    def note(self, message: str) -> None:
        from factcli.report.summary import print_note

        print_note(message)

    def warn(self, message: str) -> None:
        from factcli.report.summary import print_warning

        print_warning(message)


class EvalSession:
    def __init__(self, ui=None) -> None:
        self.ui = ui or StderrUI()  # its notes and warnings: the flow's UI (run/flow.FlowUI), else stderr
        self.store: Store | None = None
        self.writing = False
        self.source: dict | None = None  # the stored run being resumed / retried
        self.mode: str | None = None  # "resume" | "retry"
        self.suite = None  # rebuilt from the stored run
        self.source_options: dict = {}
        self.trust = None  # run/recording/trust.StoredTrust: what a resumed run takes from the store
        self.stored_outputs: list[Path] = []  # the stored -o paths a resume writes again (StoredTrust.outputs)
        self.failing: tuple[str, set[str]] | None = None
        self.all_tests: list | None = None
        self.selected: list | None = None  # a resumed run's tests, waiting for its beforeAll hook
        self.run = None
        self.scrub: Scrubber | None = None
        self.encoder: RowEncoder | None = None  # makes the rows the store takes (and keeps their texts)
        self.seq = 0
        self.loaded = 0  # rows kept from the stored run (resume, retry)
        self.finished = False
        self.heartbeat = None  # store/leases.py: refreshes the run's lease (every store)
        self._metrics_at = 0.0
        self._derived: list = []
        # rows written but not yet committed (write / flush), as the store takes them: a group's
        # finished rows are let go as soon as they are recorded, not 500 rows later (holding them cost
        # time: they were freed, cold, at each flush); a group the store fails to take is read
        # back from these tuples as the store would give them (_hold_rows)
        self._group: list[tuple] = []
        self._timer = None  # the event loop's call to flush(), GROUP_S after a group's first row
        self.options = None  # run/options.EvalOptions: as given, or as a resumed run had them
        self._outage = None  # run/recording/outage.Outage while the store does not take rows
        self.unstorable: list[tuple[str, str]] = []  # (row's place, why): rows the store refused for good
        # the rows a store that may vanish (a server) took, to show them if it is gone at the end
        self._kept = None  # run/recording/outage.Spool for a server store
        self.unstored: tuple | None = None  # (rows, tests, error): the store was gone at the end

    # ------------------------------------------------------------ before the suite is loaded

    @classmethod
    def open(cls, options, ui=None) -> "EvalSession":
        """`options`: run/options.EvalOptions; a resumed or retried run's replace them (session.options)."""
        from factcli.run.options import refused_on_resume

        session = cls(ui)
        session.options = options
        resume, retry, failing = options.resume, options.retry_errors, options.filter_failing
        if resume and retry:
            raise FactcliError("--resume and --retry-errors cannot be combined")
        ref = resume or retry
        if ref and not options.store:
            raise FactcliError(f"{'--resume' if resume else '--retry-errors'} updates the stored run; "
                               "it cannot be combined with --no-write")
        if ref:
            flag = "--resume" if resume else "--retry-errors"
            clash = refused_on_resume(options)
            if clash:
                raise FactcliError(f"{flag} uses the stored run's config and options; drop {', '.join(clash)}")
        if options.store:
            if ref or failing:  # a stored run to read: now (resuming needs the database)
                session.store = Store.open(options.db, create=not ref)
            session.writing = True  # otherwise the store is opened by begin()
        elif failing:
            session.store = Store.open(options.db)
        if ref:
            session.mode = "resume" if resume else "retry"
            session._load_source(ref)
        if failing:
            row = session.store.resolve(failing)
            keys = {r["test_key"] for r in session.store.results(row["id"], "success = 0", fields="test_key",
                                                                    order="test_idx")}
            session.failing = (row["id"], keys)
        return session

    def _load_source(self, ref: str) -> None:
        import dataclasses

        from factcli.run.options import resumed

        row = self.store.resolve(ref)
        status = shown_status(row)
        if status == "running":
            raise leases.refusal(row)
        if self.mode == "resume" and status == "complete":
            raise FactcliError(f"run {row['id']} is complete: nothing to resume "
                               "(--retry-errors re-runs its ERROR rows)")
        self.source = row
        opts = loads(row.get("options_json"), {}) or {}
        if (self.mode != "resume" and status == "complete" and not row.get("errors") and opts.get("mode") != "calibrate"
                and not self.store.errored_assertion_keys(row["id"])):
            raise FactcliError(f"run {row['id']} has no ERROR rows: nothing to retry (and no assertion whose "
                               "grading errored)")
        self.source_options = opts
        from factcli.sources import expand_env

        stored_vars = expand_env(opts.get("vars") or {})
        redacted = [k for k, v in stored_vars.items() if isinstance(v, str) and REDACTED in v]
        if redacted:
            self.ui.warn(f"--var {', '.join(redacted)} held secrets that were not stored; they are empty now")
        stored_vars = {k: ("" if k in redacted else v) for k, v in stored_vars.items()}
        # the stored options, changed by those given now; those taken from the store may name code too
        options, taken = resumed({**opts, "vars": stored_vars}, self.options.run)
        self.options = dataclasses.replace(self.options, run=options)
        from factcli.run.recording.trust import StoredTrust

        self.trust = StoredTrust(row["id"], self.options.trust_stored_config, self.ui)
        self.trust.options(taken, opts.get("vars"))
        self.stored_outputs = self.trust.outputs(opts.get("outputs") or [], self.options.outputs)
        self.suite = self._rebuild_suite(row, opts, options)
        self.selected = opts.get("tests")
        if not any(e.runs_for("beforeAll") for e in self.suite.extensions):  # else: the tests beforeAll gives
            self.select_tests(self.suite)
        if row.get("description"):
            self.suite.description = row["description"]

    def select_tests(self, suite) -> None:
        """The tests a resumed run had selected (its filters), picked from `suite`'s."""
        selected, self.selected = self.selected, None
        if selected is None:
            return
        if any(i >= len(suite.tests) for i in selected):
            raise FactcliError(f"the tests changed since run {self.source['id']} started; it cannot be resumed")
        suite.tests = [suite.tests[i] for i in selected]

    def _rebuild_suite(self, row: dict, opts: dict, options):
        from factcli.run import runner

        run_id = row["id"]
        files = loads(row.get("config_files_json"), []) or []
        if opts.get("mode") == "calibrate":  # its steps are built by factcli.run.calibrate, not from a config
            raise FactcliError(f"run {run_id} is a calibration: resume it with factcli calibrate --resume {run_id}")
        trust = self.trust
        if opts.get("mode") == "model_outputs":
            from factcli.config.model_outputs import suite_from_outputs

            a, o = Path(opts.get("assertions") or ""), Path(opts.get("model_outputs") or "")
            if not (a.is_file() and o.is_file()):
                raise FactcliError(f"run {run_id} scored {a} and {o}, which are gone; it cannot be resumed")
            trust.files("--assertions/--model-outputs", [a, o], "the files it scored are named by the store")
            trust.settle()
            self.ui.note(f"Re-loading {a} and {o} (they still exist).")
            return suite_from_outputs(a, o, options.vars)
        stored_text = row.get("config_json") or "{}"
        stored = loads(stored_text, {}) or {}
        if files and all(Path(f).is_file() for f in files):
            from factcli.config.loader import raw_config

            # the user's own config only when their files give, byte for byte, the one stored (the same
            # encoding the run stored it with); else the store chose which files to load
            raw = raw_config(files, options.providers)
            if Scrubber(raw).dumps(raw) != stored_text:
                trust.files("config file", files, f"the config files it names are not the config it stored "
                            f"(changed since run {run_id} started, or not its files)")
                trust.config(raw)
            trust.settle()
            self.ui.note(f"Re-loading the config from {', '.join(files)} (the files still exist).")
            return runner.load(files, options)
        from factcli.config.loader import build_suite

        cfg = dict(stored) if isinstance(stored, dict) else {}
        gone = ", ".join(files) or "the config files"
        trust.config(cfg, f"{gone} {'is' if len(files) == 1 else 'are'} not here: the config stored with the run")
        trust.settle()
        self.ui.note(f"The config files of run {run_id} are gone; using the config stored with the run.")
        if REDACTED in json.dumps(cfg):
            self.ui.warn("the stored config had secrets that were never stored; they stay '[redacted]' "
                  "(put them in environment variables and reference them as ${NAME})")
        env_block = cfg.get("env")
        if isinstance(env_block, dict):  # secrets there were stored as ${NAME}: the environment has them now
            from factcli.sources import expand_env

            kept = {}
            for k, v in env_block.items():
                value = expand_env(v) if isinstance(v, str) else v
                if isinstance(value, str) and (value.startswith("${") or REDACTED in value):
                    continue
                kept[k] = value
            cfg["env"] = kept
        base = Path(row.get("base_dir") or ".")
        with runner.downloads(options):
            return build_suite(cfg, base / "stored-config.yaml", options.vars)

    def filter_suite(self, suite) -> None:
        """--filter-failing RUN: keep the tests (by description and vars) that failed or errored there."""
        from factcli.config.stream import is_streamed

        if self.failing is not None and is_streamed(suite.tests):
            suite.tests.materialize()  # the tests kept are picked from a list
        # a streamed suite (config/stream.py) is not copied: it is read again, not held
        self.all_tests = suite.tests if is_streamed(suite.tests) else list(suite.tests)
        if self.failing is None:
            return
        from factcli.config.plan import test_combinations
        from factcli.run.planning.row_vars import plan_transforms

        run_id, keys = self.failing
        if suite.transform_errors is None:  # stored rows carry the transformed vars
            suite.transform_errors = plan_transforms(suite.tests)
        keep = [t for t in suite.tests
                if any(test_key(t.description, combo) in keys
                       for combo in test_combinations(t))]
        suite.tests = keep
        self.ui.note(f"--filter-failing {run_id}: {len(keep)} of {len(self.all_tests)} tests failed or errored there.")

    # ------------------------------------------------------------ the run

    def begin(self, run) -> None:
        self.run = run
        if not self.writing:
            return
        if self.store is None:
            self.store = Store.open(self.options.db, create=True)
        from factcli.scoring.metrics import compile_derived

        self._derived = compile_derived(run.suite.derived_metrics)
        self.scrub = Scrubber(run.suite.raw)
        self.encoder = RowEncoder(self.scrub)
        if self.store.kind == "postgresql":
            from factcli.run.recording.outage import Spool

            self._kept = Spool()
        self._metrics_at = time.monotonic()  # the first running totals a second in: a short run has only its final ones
        try:
            if self.source is not None:
                self._resume(run)
            else:
                self._insert(run)
                self._stream_rows(run)
            self.heartbeat = leases.heartbeat(self.store, run.run_id)
        except store_errors() as exc:
            raise FactcliError(f"{self.store.path}: cannot write the run: {exc} "
                               "(--db FILE stores runs elsewhere; --no-write does not store them)") from None

    def outputs(self, given) -> list[Path]:
        """The files this run writes: those given now and, when resuming or retrying, those the run
        was started with (so that they end up holding the finished run)."""
        stored = (self.stored_outputs if self.trust is not None
                  else [Path(p) for p in self.source_options.get("outputs") or []])
        return list(dict.fromkeys(stored + [Path(p).resolve() for p in given]))

    def _options_record(self, run) -> dict:
        """The options a resumed run takes back (run/options.py), as this run settled them, and what
        it ran: the suite's tests it selected, when not all."""
        import dataclasses

        from factcli.run.options import to_record

        o = self.options
        settled = dataclasses.replace(o, run=dataclasses.replace(o.run, repeat=run.repeat),
                                      filter_failing=self.failing[0] if self.failing else None,
                                      outputs=self.outputs(o.outputs))
        record = {"repeat": run.repeat, "concurrency": run.concurrency, "cache": run.cache, **to_record(settled),
                  "mode": "config" if o.assertions is None else "model_outputs"}
        selected = run.steps.tests_selected(self.all_tests if self.all_tests is not None else list(run.suite.tests))
        if selected is not None:
            record["tests"] = selected
        return record

    def _insert(self, run) -> None:
        scrub = self.scrub
        files = [str(Path(f).resolve()) for f in run.suite.config_files if f and not f.startswith("<")]
        self.store.insert_run({
            "id": run.run_id, "created_at": run.created_at, "updated_at": now(), "finished_at": None,
            "description": scrub.text(run.suite.description), "status": "started",
            "config_json": scrub.dumps(run.suite.raw), "config_files_json": json.dumps(files),
            "base_dir": str(Path(run.suite.base_dir).resolve()),
            "options_json": scrub.dumps(self._options_record(run)), "graders_json": json.dumps(run.graders),
            "total_steps": run.total_steps, "rows_done": 0, "successes": 0, "failures": 0, "errors": 0,
            "tokens_json": None, "cost": None, "duration_ms": 0, "retries": 0, "calls": 0,
            "abort_reason": None, "warnings_json": None, "factcli_version": VERSION,
            "pid": os.getpid(), "host": socket.gethostname(), "attempts": 1,
        })
        self.store.set_columns(run.run_id, [column_record(c, scrub) for c in run.columns])

    def _resume(self, run) -> None:
        import dataclasses

        src, store = self.source, self.store
        run_id = src["id"]
        stored_cols = store.columns(run_id)
        same = len(stored_cols) == len(run.columns) and all(
            s["provider_id"] == self.scrub.text(c.provider.id)
            and (s["prompt_label"] or "") == self.scrub.text(c.prompt.label)
            for s, c in zip(stored_cols, run.columns))
        if not same:
            raise FactcliError(f"the prompts or providers changed since run {run_id} started; "
                               "it cannot be resumed (start a new eval)")
        plan = run.steps.keyed()
        done = store.done_keys(run_id)
        # a beforeEach hook may have changed a row's vars: its stored key is not the plan's
        hooked = any(e.runs_for("beforeEach") for e in run.suite.extensions)
        for key, (_, stored_key) in done.items():
            step = plan.get(key)
            if step is None or (test_key(step.test.description, step.vars) != stored_key and not hooked):
                raise FactcliError(f"test {key[0]} of run {run_id} no longer matches the config "
                                   "(the tests changed since the run started); it cannot be resumed")
        from factcli.run.calling.breaker import ROW_MARK

        if self.mode == "resume" and ROW_MARK not in (src.get("abort_reason") or ""):
            keep = set(done)
        else:  # --retry-errors, or resuming a run the circuit breaker stopped: its outage's rows run again,
            # with every row holding an assertion not judged (scoring/outcome.needs_retry)
            keep = {k for k, (fr, _) in done.items() if fr not in ERROR_REASONS} - store.errored_assertion_keys(run_id)
        keep = _settle(keep, plan, run.conversations)
        run.run_id, run.created_at = run_id, src["created_at"]
        self._stream_rows(run)
        for rec in store.results(run_id):
            key = (rec["test_idx"], rec["prompt_idx"], rec["repeat_idx"])
            if key not in keep:
                continue
            step = plan[key]
            if hooked:  # the vars the model saw
                step = dataclasses.replace(step, vars=loads(rec.get("vars_json"), {}) or {})
            result = from_record(rec, run.columns, step)
            if result.grading is not None and any(
                    c.assertion is not None and c.assertion.type in COMPARING
                    for c in result.grading.component_results):
                frozen = [a for a in step.test.assertions if a.type not in COMPARING]
                result.step = dataclasses.replace(step, test=dataclasses.replace(step.test, assertions=frozen))
            if run.conversations is not None:  # later turns see it as if it just ran
                run.conversations.restore(result)
            run.metrics[result.step.prompt_idx].add(result, self._derived)
            run.keep(result)
            self.loaded += 1
            self.seq = max(self.seq, rec["seq"] or 0)
        run.steps.leave_out(keep, plan)
        leases.take(store, src)  # refused if another process took the run since it was read
        store.update_run(run_id, {"attempts": (src.get("attempts") or 1) + 1})
        what = "Resuming" if self.mode == "resume" else "Retrying the errors of"
        self.ui.note(f"{what} run {run_id}: {self.loaded} of {run.total_steps} row{'s' if run.total_steps != 1 else ''} kept, "
              f"{len(run.steps)} to run.")

    def _stream_rows(self, run) -> None:
        """From here on the run's rows live in the store, not in memory (EvalRun.keep)."""
        from factcli.store.records import StoredRows

        run.stored_rows = StoredRows(self.store.target, run.run_id, run.columns, flush=self.flush)

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

    def recorder(self, forward=None):
        """The on_result callback: forward (progress bar), then write the row (committed with its group)."""

        def on_result(result) -> None:
            if forward is not None:
                forward(result)
            self.write(result)

        return on_result

    def write(self, result) -> None:
        """Queue a finished row for the store. Rows are committed in groups, at most GROUP_ROWS rows
        or GROUP_S seconds after the group's first row (a timer on the running event loop), and at
        the end, also after Ctrl-C, an error or the budget: a SIGKILL loses at most the last group,
        which --resume runs again (from the response cache)."""
        if not self.writing:
            return
        self._queue(result)
        if len(self._group) >= GROUP_ROWS:
            self.flush()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop to wake us: write it now
                self.flush()
                return
            self._timer = loop.call_later(GROUP_S, self.flush)

    def _queue(self, result) -> None:
        self.seq += 1
        self._group.append(self.encoder.row(self.run.run_id, result, self.seq))

    def flush(self) -> None:
        """Write and commit the queued rows (and, once a second, the run's running totals). A group
        stays queued until it is committed (a Ctrl-C inside the write: finish() writes it again).
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
                tokens, cost = self._totals(self.run)
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

    def finish(self, run, error: BaseException | None = None) -> None:
        """Final status, totals and column metrics; also after Ctrl-C, an abort or an error."""
        if self.finished or self.store is None:
            return
        self.finished = True
        if self.heartbeat is not None:
            self.heartbeat.stop()
        try:
            self.flush()
            if self._outage is not None:
                self._wait_for_store()
            if self.writing:
                self._finish(run, error)
        except store_errors() as exc:
            self.ui.warn(f"could not finish the run in {self.store.path}: {exc}")
        finally:
            if self._kept is not None:
                self._kept.close()
            try:
                self.store.close()
            except store_errors():
                pass

    @staticmethod
    def _totals(run) -> tuple[dict, float]:
        from factcli.types import TokenUsage

        tokens, grader, cost, grader_cost, unpriced, grader_unpriced = TokenUsage(), TokenUsage(), 0.0, 0.0, 0, 0
        batched, saved = 0, 0.0
        for m in run.metrics:
            tokens.add(m.tokens)
            grader.add(m.grader_tokens)
            cost, grader_cost = cost + m.cost, grader_cost + m.grader_cost
            unpriced, grader_unpriced = unpriced + m.cost_unpriced, grader_unpriced + m.grader_unpriced
            batched, saved = batched + m.batched, saved + m.batch_saved
        return {**tokens.to_json(), "assertions": grader.to_json(), "graderCost": grader_cost,
                "costUnpriced": unpriced, "graderCostUnpriced": grader_unpriced,
                **({"batched": batched, "batchSaved": saved} if batched else {})}, cost

    def _finish(self, run, error) -> None:
        store, run_id = self.store, run.run_id
        status = "error" if error is not None else run.status
        if status == "started":
            status = "interrupted"
        counts = store.counts(run_id)
        rows_done = sum(c["pass"] + c["fail"] + c["error"] for c in counts.values())
        if status == "complete":
            if rows_done < run.total_steps:
                status = "interrupted"  # e.g. --retry-errors on a run that never finished
            for r in run.rows:  # comparisons changed these rows after they were written
                if compares(r.step.test):
                    self._queue(r)
            self.flush()
        tokens_json, cost = self._totals(run)
        src = self.source or {}
        run.duration_ms = (src.get("duration_ms") or 0) + (run.duration_ms or 0)
        warnings = list(run.warnings)
        if error is not None and not isinstance(error, KeyboardInterrupt):
            warnings.append(f"{type(error).__name__}: {error}")
        store.update_run(run_id, {
            "status": status, "updated_at": now(), "finished_at": now(), "rows_done": rows_done,
            "successes": sum(c["pass"] for c in counts.values()), "failures": sum(c["fail"] for c in counts.values()),
            "errors": sum(c["error"] for c in counts.values()),
            "tokens_json": json.dumps(tokens_json), "cost": cost, "duration_ms": run.duration_ms,
            "retries": (src.get("retries") or 0) + run.retries, "calls": (src.get("calls") or 0) + run.calls,
            "abort_reason": self.scrub.text(run.abort_reason), "graders_json": json.dumps(run.graders),
            "warnings_json": self.scrub.dumps(warnings) if warnings else None,
            "gates_json": self.scrub.dumps([g.to_json() for g in run.gate_results]) if run.gate_results else None,
        }, commit=False)
        store.set_column_metrics(run_id, [metrics_to_json(m, self.scrub) for m in run.metrics], commit=False)
        store.commit()


def _settle(keep: set, plan: dict, conversations) -> set:
    """The stored rows a resumed run keeps: not those a rerun row feeds (the later turns of its
    conversation, the rows after its storeOutputAs: their inputs would change), nor the columns of a
    test a comparison (select-best, max-score) ranks again when one of its columns runs again."""
    keep = set(keep)
    steps = list(plan.values())
    while True:
        before = len(keep)
        rerun = {k for k in plan if k not in keep}
        if conversations is not None and conversations.active:
            keep -= conversations.downstream(steps, rerun)
        rerun_tests = {k[0] for k in plan if k not in keep}
        keep = {k for k in keep if not (k[0] in rerun_tests and compares(plan[k].test))}
        if len(keep) == before:
            return keep

