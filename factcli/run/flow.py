"""The one eval flow: load -> filter -> beforeAll -> plan -> preflight -> store -> execute -> outputs.

`factcli eval` (cli/eval_cmd.py) and the Python API (run/api.py, and through it the pytest plugin)
run an eval through `Flow`, with the same typed options (`EvalOptions`). What differs between them
is only how they talk to the user, a `FlowUI`: the CLI prints warnings, spinners and a progress bar
on the terminal, the API turns warnings into Python warnings and shows nothing.

    flow = Flow(options, ui)
    run = flow.prepare()          # load, filter, beforeAll, plan, preflight: no call, nothing stored
    await flow.execute()          # store (the run row), execute (rows stored in groups), finish: flow.run
    flow.write_outputs()          # -o files and the config's outputPath

A run that resumes, retries or filters on a stored run opens the store first (its suite, or its
tests, come from there); any other opens it at the store stage, so a dry run or a config that
fails its checks stores nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
from pathlib import Path
from typing import Any, Callable, ContextManager

from factcli import templating
from factcli.errors import ConfigProblems, FactcliError
from factcli.run import runner
from factcli.run.options import EvalOptions  # noqa: F401  (the flow's options; tests import it here)
from factcli.run.planning.graders import SELF_PREFERENCE


class FlowUI:
    """How a flow talks to its user; this one is silent (warnings are dropped)."""

    refuse_empty_filters = True  # filters that leave no test: an error (the CLI), or an empty run with a warning

    def option(self, name: str) -> str:
        """How the user spells an option in a message (`--filter-pattern` or `filter_pattern`)."""
        return name

    def warn(self, message: str) -> None:
        pass

    def note(self, message: str) -> None:
        """What the run does that the user did not ask in so many words (re-loading a resumed run's config)."""

    def loaded(self, suite) -> None:
        """The suite as loaded, before any check: its warnings."""
        for message in suite.warnings:
            self.warn(message)

    def working(self, message: str) -> ContextManager:
        return contextlib.nullcontext()

    def progress(self, run) -> tuple[Callable | None, Callable | None, Callable[[], None]]:
        """(on each row, on a warning during the run, stop): a progress bar's hooks."""
        return None, self.warn, lambda: None

    def wrote(self, path: Path) -> None:
        pass


class Flow:
    """`load_config(config, run_options)`: how `options.config` becomes a Suite (the API also takes
    a dict or YAML text, run/api.load_suite); by default it is a list of config files."""

    def __init__(self, options: EvalOptions, ui: FlowUI | None = None, load_config: Callable | None = None):
        self.options = options
        self.ui = ui or FlowUI()
        self.load_config = load_config or runner.load
        self.session = None
        self.suite = None
        self.run = None
        self.outputs: list[Path] = []
        self.rows: list = []
        self._told: set = set()  # outputPath entries warned about

    # ------------------------------------------------------------ load, filter, beforeAll, plan, preflight

    def prepare(self):
        """Every stage before the first call; raises FactcliError for anything wrong. Returns the run."""
        from factcli import settings
        from factcli.run.recording.session import EvalSession

        o = self.options
        for env_file in reversed(o.env_files):  # a later file wins (promptfoo's envPath list); the environment first
            settings.load_env_file(str(env_file))
        if (o.assertions is None) != (o.model_outputs is None):
            raise FactcliError(f"{self.ui.option('assertions')} and {self.ui.option('model_outputs')} go together")
        session = self.session = EvalSession.open(o, self.ui)
        self.options = session.options  # a resumed run's: its stored options, changed by those given now
        outputs = [Path(p) for p in o.outputs]
        self.outputs = session.outputs(outputs) if session.source_options else outputs
        from factcli.config.context import problems_deferred

        with problems_deferred():  # the load's problems wait for the checks below, to be told together
            suite = self._load(session)
        try:
            with templating.filters_used(suite.filters):  # the suite's own nunjucksFilters, no other run's
                return self._checked(session, suite)
        except FactcliError as exc:
            if not suite.problems or isinstance(exc, ConfigProblems) or str(exc) in suite.problems:
                raise  # (already all of them, or the load's one problem raised as itself by the preflight)
            raise ConfigProblems(suite.problems + [str(exc)]) from None  # a check that stopped, after the load's problems

    def _checked(self, session, suite):
        """prepare() after the load: filter, beforeAll, plan, preflight."""
        o, ro = self.options, self.options.run
        if o.strict and suite.unknown_keys:
            raise UnknownKeys([re.sub(r" \(ignored( here)?\)", "", line) for line in suite.unknown_keys])
        self.ui.loaded(suite)  # every way of loading: config, resumed run, --model-outputs
        _check_config_options(suite)
        if ro.filter_pattern:
            try:
                re.compile(ro.filter_pattern)
            except re.error as exc:
                raise FactcliError(f"{self.ui.option('filter_pattern')}: invalid regex: {exc}") from None
        shown = len(suite.warnings)  # told above; the run keeps them with its other warnings
        checked, suite = self._before_all(session, suite)
        with templating.filters_used(suite.filters):  # (beforeAll may have given other filters)
            session.filter_suite(suite)
            run = runner.prepare(suite, ro)
            run.warnings_shown = shown
            self._gates(run, suite)
            self.suite, self.run = suite, run
            if run.total_steps == 0 and suite.tests and not self.ui.refuse_empty_filters:
                from factcli.config.plan import tests_counted

                self.ui.warn(f"the filters leave no test to run (of {tests_counted(suite)})")
            if not checked:  # (a beforeAll that changed nothing leaves the checked suite)
                self._preflight(run)
        return run

    def _gates(self, run, suite) -> None:
        """The config's gates and --gate's, checked before any call (run/recording/gates.py)."""
        run.gates = list(getattr(suite, "gates", ()))
        if self.options.gates:  # (the module only for a run with gates)
            from factcli.config.gates import parse_cli_gate

            run.gates += [parse_cli_gate(g) if isinstance(g, str) else g for g in self.options.gates]
        if run.gates:
            from factcli.run.recording import gates

            gates.check_before_run(run.gates, suite)

    def _load(self, session):
        o = self.options
        if session.suite is not None:  # a resumed or retried run: its stored config
            return session.suite
        if o.assertions is not None:
            from factcli.config.model_outputs import suite_from_outputs

            return suite_from_outputs(o.assertions, o.model_outputs, o.run.vars)
        config = o.config
        if config is None or config == []:
            from factcli.config.loader import default_config_path

            found = default_config_path()
            if found is None:
                raise FactcliError("no config: pass -c FILE, or run where promptfooconfig.yaml is")
            config = [found]
        from factcli.config.lines import reading_first
        from factcli.config.plan import first_tests_kept

        # the tests files are read no further than the filters can keep
        first = first_tests_kept(o.run.filter_first_n, o.run.filter_pattern, o.filter_failing)
        with self.ui.working("Reading the config…"), reading_first(first):  # and the tests it downloads
            return self.load_config(config, o.run)

    def _before_all(self, session, suite):
        """Extension hooks' beforeAll, before the run is planned (its tests are the config's, not yet
        filtered or expanded) and after a preflight of the config as loaded, so that a config that
        cannot run calls no hook. Returns (whether the returned suite was checked, the suite
        beforeAll left); a dry run calls no hook."""
        if not getattr(suite, "extensions", None):  # no hook to call: their code is left unimported
            return False, suite
        from factcli.run.hooks import Hooks

        hooks = Hooks.of(suite)
        if hooks is None or not hooks.has("beforeAll") or self.options.dry_run:
            return False, suite
        # the preflight's plan leaves transformVars to the tests beforeAll gives back (they run once per test)
        probe = runner.prepare(dataclasses.replace(suite, transform_errors={}), self.options.run)
        self._preflight(probe, suite)
        hooked = run_sync(lambda: hooks.before_all_async(suite))
        session.select_tests(hooked)  # a resumed run: its tests are among those beforeAll gave
        return hooked is suite, hooked

    def _preflight(self, run, suite=None) -> None:
        """Every check that costs nothing, before the first call."""
        from factcli.run.planning import preflight

        suite = suite or run.suite
        ro = self.options.run
        filters = {self.ui.option(k): v for k, v in (
            ("filter_pattern", ro.filter_pattern), ("filter_first_n", ro.filter_first_n),
            ("filter_sample", ro.filter_sample), ("filter_failing", self.options.filter_failing))
            } if self.ui.refuse_empty_filters else {}
        with self.ui.working("Checking models, graders, outputs and knowledge sources before any call…"):
            preflight.check(run, self.output_paths(suite), filters, "-o" if self.outputs else "outputPath")

    # ------------------------------------------------------------ store, execute

    async def execute(self) -> None:
        """Store the run, execute its rows (each stored as it finishes, committed in groups) and
        finish it in the store, also when Ctrl-C, a cancellation or an error stops it."""
        run, session = self.run, self.session
        session.begin(run)  # the store stage: the run row, status started (a resumed run: what is left to run)
        if run.batch is not None and session.writing and session.store is not None:  # its batches, in the store
            from factcli.store.batches import BatchJournal

            run.batch["journal"] = BatchJournal(session.store, run.run_id)
        idle = not len(run.steps)
        for message in run.warnings[run.warnings_shown:]:  # the plan's own, not yet told
            if not (idle and SELF_PREFERENCE in message):  # no grader call is coming: nothing to warn of
                self.ui.warn(message)
        run.warnings_shown = len(run.warnings)
        advance, warn, stop = self.ui.progress(run)
        if warn is not None:  # a retry's warning may quote a key from an error message: shown as stored
            from factcli.store.redact import Scrubber

            warn = _scrubbed(warn, Scrubber(run.suite.raw))
        keep = self.rows.append if self.options.keep_rows else None

        def forward(result) -> None:
            if advance is not None:
                advance(result)
            if keep is not None:
                keep(result)

        try:
            await runner.execute(run, on_result=session.recorder(forward), warn=warn)
        except (KeyboardInterrupt, asyncio.CancelledError):
            run.status = runner.STATUS_INTERRUPTED
            stop()
            session.finish(run)
            raise
        except BaseException as exc:
            stop()
            session.finish(run, exc)
            raise
        stop()
        if run.batch is not None and run.batch.get("summary"):  # what went in batches (run/calling/batches.py)
            self.ui.note(run.batch["summary"])
        if run.status == runner.STATUS_COMPLETE:  # the config's gates, and its critical tests' (run/recording/gates.py),
            from factcli.run.recording import gates  # before finish: the store keeps them with the run (export, show, view)

            run.gate_results = gates.evaluate(run, run.gates)
        session.finish(run)
        if self.options.keep_rows:
            run.rows, run.stored_rows = self.rows, None  # the caller holds every row; the store has them too
        # Returns nothing: asyncio.run's SIGINT handling reprs the finished task, result included,
        # and the repr of a large run is slow and big.

    @property
    def stored(self) -> bool:
        return bool(self.session is not None and self.session.writing)

    # ------------------------------------------------------------ outputs

    def output_paths(self, suite=None) -> list[Path]:
        """The files the run writes: the -o files, else the config's outputPath (promptfoo: -o replaces
        it). An outputPath without a format (promptfoo 0.121.20 runs the eval, then fails writing it) is
        left out with a warning (told once, at the preflight)."""
        if self.outputs:
            return self.outputs
        from factcli.run.planning.preflight import output_problem

        paths = []
        for p in getattr(suite or self.suite, "output_path", None) or []:
            problem = output_problem(Path(p), "outputPath", probe=False)
            if problem and "unknown format" in problem:
                if p not in self._told:
                    self._told.add(p)
                    self.ui.warn(f"{problem}; nothing will be written to it (promptfoo 0.121.20 runs the eval, "
                                 "then fails writing it)")
                continue
            paths.append(Path(p))
        return paths

    def write_outputs(self) -> list[Path]:
        """The -o files, else the config's outputPath, each written from the finished run."""
        paths = self.output_paths()
        if paths:  # the exporters (and html) only for a run that writes a file
            from factcli.report.exports import write_export
        for path in paths:
            with self.ui.working(f"Writing {path}…"):
                write_export(self.run, path)
            self.ui.wrote(path)
        return paths


def _check_config_options(suite) -> None:
    """The config's commandLineOptions, each value checked by its option's own type and range
    (run/options.Option.value), also where they are not applied (evaluate() takes its keywords
    instead); `factcli eval` has checked them already, naming their file (cli/eval_cmd.py)."""
    raw = getattr(suite, "raw", None)
    if isinstance(raw, dict) and isinstance(raw.get("commandLineOptions"), dict):
        from factcli.config import cli_options

        files = getattr(suite, "config_files", None) or ["config"]
        EvalOptions().filled(cli_options.values([(Path(files[-1]), raw)]))


def _scrubbed(warn: Callable[[str], None], scrub) -> Callable[[str], None]:
    return lambda message: warn(scrub.text(message))


def run_sync(make: Callable[[], Any]) -> Any:
    """Run the coroutine `make()` returns to its end: on this thread when no event loop runs here,
    else (a notebook cell, an async test) on a loop of its own in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="factcli") as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


class UnknownKeys(FactcliError):
    """--strict: the unknown keys are the problems, one line each."""

    def __init__(self, lines: list[str]):
        self.problems = lines if len(lines) > 1 else []
        super().__init__(f"{len(lines)} unknown or ignored keys (--strict; nothing was sent):" if len(lines) > 1
                         else f"{lines[0]} (--strict; nothing was sent)")
