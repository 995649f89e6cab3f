"""Where a run comes from, before its suite is loaded: the config given now, or a stored run that
`--resume` or `--retry-errors` takes up (its config, options, tests and -o files, and what the user
trusts of them: run/recording/trust.py), and the run `--filter-failing` picks tests from. The
options record a later resume reads back is written here too (`options_record`), beside the code
that reads it (`_load`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from factcli.errors import FactcliError
from factcli.store import leases
from factcli.store.database import Store, shown_status
from factcli.store.encode import loads
from factcli.store.redact import REDACTED, Scrubber
from factcli.types import test_key


class Source:
    def __init__(self, options, ui) -> None:
        self.ui = ui  # notes and warnings: the flow's UI (run/flow.FlowUI), else stderr
        self.options = options  # run/options.EvalOptions: as given, or as a resumed run had them
        self.store: Store | None = None  # opened here when a stored run is read, else at the store stage
        self.writing = False  # the run is stored (not --no-write)
        self.row: dict | None = None  # the stored run being resumed / retried
        self.mode: str | None = None  # "resume" | "retry"
        self.suite = None  # rebuilt from the stored run
        self.stored_options: dict = {}  # its options record
        self.trust = None  # run/recording/trust.StoredTrust: what a resumed run takes from the store
        self.stored_outputs: list[Path] = []  # the stored -o paths a resume writes again (StoredTrust.outputs)
        self.failing: tuple[str, set[str]] | None = None  # --filter-failing: (run id, its failed test keys)
        self.all_tests: list | None = None
        self.selected: list | None = None  # a resumed run's tests, waiting for its beforeAll hook

    @classmethod
    def open(cls, options, ui) -> "Source":
        """`options`: run/options.EvalOptions; a resumed or retried run's replace them (source.options)."""
        from factcli.run.options import refused_on_resume

        source = cls(options, ui)
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
                source.store = Store.open(options.db, create=not ref)
            source.writing = True  # otherwise the store is opened at the store stage (EvalSession.begin)
        elif failing:
            source.store = Store.open(options.db)
        if ref:
            source.mode = "resume" if resume else "retry"
            source._load(ref)
        if failing:
            row = source.store.resolve(failing)
            keys = {r["test_key"] for r in source.store.results(row["id"], "success = 0", fields="test_key",
                                                                   order="test_idx")}
            source.failing = (row["id"], keys)
        return source

    def _load(self, ref: str) -> None:
        from factcli.run.options import resumed

        row = self.store.resolve(ref)
        status = shown_status(row)
        if status == "running":
            raise leases.refusal(row)
        if self.mode == "resume" and status == "complete":
            raise FactcliError(f"run {row['id']} is complete: nothing to resume "
                               "(--retry-errors re-runs its ERROR rows)")
        self.row = row
        opts = loads(row.get("options_json"), {}) or {}
        if (self.mode != "resume" and status == "complete" and not row.get("errors") and opts.get("mode") != "calibrate"
                and not self.store.errored_assertion_keys(row["id"])):
            raise FactcliError(f"run {row['id']} has no ERROR rows: nothing to retry (and no assertion whose "
                               "grading errored)")
        self.stored_options = opts
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
        self.suite = self.rebuild_suite(row, opts, options)
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
            raise FactcliError(f"the tests changed since run {self.row['id']} started; it cannot be resumed")
        suite.tests = [suite.tests[i] for i in selected]

    def rebuild_suite(self, row: dict, opts: dict, options):
        """The suite of the stored run `row`: from its config files when they are still the config it
        stored, else from the config stored with it (what the user trusts of it: run/recording/trust.py)."""
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

    def outputs(self, given) -> list[Path]:
        """The files this run writes: those given now and, when resuming or retrying, those the run
        was started with (so that they end up holding the finished run)."""
        stored = (self.stored_outputs if self.trust is not None
                  else [Path(p) for p in self.stored_options.get("outputs") or []])
        return list(dict.fromkeys(stored + [Path(p).resolve() for p in given]))

    def options_record(self, run) -> dict:
        """The options a resumed run takes back (run/options.py; read by `_load`), as this run settled
        them, and what it ran: the suite's tests it selected, when not all."""
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
