"""One eval run's plan and execution: load, plan (prepare), execute, aggregate. The eval flow (run/flow.py)
drives it for the CLI and the API."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from contextlib import contextmanager
from typing import Callable, Iterator

from factcli import settings, stats, templating
from factcli.config.loader import Suite, build_suite, load_suite, with_providers
from factcli.config.plan import Column, expand
from factcli.methods import reports as method_reports
from factcli.run.options import RunOptions
from factcli.run.planning.graders import check_graders, check_prices, model_name_warnings
from factcli.run.planning.steps import Steps
from factcli.scoring.metrics import ColumnMetrics, compile_derived
from factcli.scoring.registry import COMPARING, compares
from factcli.types import EvalResult, compact_row

STATUS_COMPLETE, STATUS_INTERRUPTED, STATUS_ABORTED = "complete", "interrupted", "aborted"
STATUS_WAITING = "waiting"  # --detach: left while its batches run (run/calling/batches.py)


@dataclass
class EvalRun:
    """One run as it is planned, executed and reported: its suite, columns and per-column metrics, its
    status, counts and budget, and its rows (held, or read back from the store)."""

    run_id: str
    suite: Suite
    columns: list[Column]
    metrics: list[ColumnMetrics]
    # Finished rows held in memory: every row, unless `stored_rows` is set (a stored run), when only
    # the rows a comparison will still change stay here. Read every row through all_rows().
    rows: list[EvalResult] = field(default_factory=list)
    stored_rows: object = None  # records.StoredRows: the store has this run's rows
    total_steps: int = 0
    created_at: str = ""
    started: float = 0.0
    duration_ms: int = 0
    status: str = "started"
    abort_reason: str | None = None
    retries: int = 0
    calls: int = 0
    throttling: dict = field(default_factory=dict)  # per endpoint asked to slow down (run/calling/limits.py)
    max_cost: float | None = None  # the budget in USD (run/calling/budget.py)
    warnings: list[str] = field(default_factory=list)
    concurrency: int = 4
    repeat: int = 1
    cache: bool = True
    graders: list[str] = field(default_factory=list)
    grader_source: object = None
    gates: list = field(default_factory=list)  # config/gates.Gate: the config's and --gate's
    gate_results: list = field(default_factory=list)  # run/recording/gates.GateResult, once the run has finished
    _tallies: list | None = field(default=None, repr=False)  # per column: (stats.ColumnSample, ColumnMethods)
    _pending: list = field(default_factory=list, repr=False)  # rows waiting for the comparisons
    # what prepare() plans and execute() runs (a stored run, read back, has none of it)
    steps: Steps = field(default_factory=Steps, repr=False)  # what execute() runs (run/planning/steps.py)
    conversations: object = field(default=None, repr=False)  # run/planning/conversations: the multi-turn tests' state
    _delay: float = 0.0  # ms between calls (delay); one call at a time when set
    _vars_errors: dict | None = field(default=None, repr=False)  # transformVars' failures by test
    _unknown_vars: set = field(default_factory=set, repr=False)  # vars the plan already warned of
    # what the load and the checks found and let pass: reported together by the preflight (run/planning/preflight.py)
    problems: list[str] = field(default_factory=list)
    grader_specs: list = field(default_factory=list)  # (ProviderSpec, kind) of every grader the run may call
    warnings_shown: int = 0  # how many of `warnings` the user has been told
    abort_exit_code: int = 3  # the exit code of an aborted run: 3 a provider, 1 a user's hook
    trip: object = None  # run/calling/breaker.Trip: the endpoint the circuit breaker stopped, which ended the run
    ratings: dict | None = None  # a stored run's ratings by row, for its exports (report/ratings.py)
    batch: dict | None = None  # batch mode (run/calling/batches.py): {default, retry, detach, journal, on_state}

    @property
    def successes(self) -> int:
        return sum(m.test_pass for m in self.metrics)

    @property
    def failures(self) -> int:
        return sum(m.test_fail for m in self.metrics)

    @property
    def errors(self) -> int:
        return sum(m.test_error for m in self.metrics)

    @property
    def unjudged(self) -> int:
        """ERROR rows the judge could not judge (types.FAILURE_GRADING): out of the pass rate."""
        return sum(m.test_unjudged for m in self.metrics)

    @property
    def judged(self) -> int:
        return self.successes + self.failures + self.errors - self.unjudged

    @property
    def pass_rate(self) -> float | None:
        """Over the rows that were judged; None when none was."""
        total = self.judged
        return None if total == 0 else self.successes / total

    @property
    def row_count(self) -> int:
        return self.successes + self.failures + self.errors

    def _source(self):
        from factcli.store.records import MemoryRows

        return self.stored_rows if self.stored_rows is not None else MemoryRows(self.rows)

    def all_rows(self) -> Iterator[EvalResult]:
        """Every row in (test, column) order, streamed back from the store for a stored run."""
        return iter(self._source())

    def sorted_rows(self) -> list[EvalResult]:
        return list(self.all_rows())

    def first_tests(self, n: int) -> tuple[list[EvalResult], int]:
        """The rows of the first `n` tests, in all_rows() order, and the number of tests."""
        return self._source().first_tests(n)

    def row_facts(self):
        """records.RowFacts: the var names, named scores and descriptions of every row."""
        return self._source().facts()

    # -- while the run executes

    def keep(self, row: EvalResult) -> None:
        """Take a recorded row (after its metrics and its write to the store): count it in its
        column's statistics once it is final, and hold it in memory unless the store has it. A row
        a comparison will still change is final, and let go, only after the comparisons."""
        if compares(row.step.test):
            self._pending.append(row)
        else:
            self._tally(row)
            if self.stored_rows is not None:
                return
        compact_row(row)
        self.rows.append(row)

    def finalize(self) -> None:
        """Every column's statistics and method reports, from the rows kept so far (also for a run
        that stopped early)."""
        for row in self._pending:
            self._tally(row)
        self._pending = []
        tallies = self._column_tallies()
        methods = method_reports.reports_of([t[1] for t in tallies])
        for m, (sample, _, judged), found in zip(self.metrics, tallies, methods):
            m.stats = sample.stats()
            m.methods = found
            m.judge_corrected = judged.reports()

    def _column_tallies(self) -> list:
        if self._tallies is None:
            self._tallies = [(stats.ColumnSample(self.repeat), method_reports.ColumnMethods(), stats.JudgeTally())
                             for _ in self.columns]
        return self._tallies

    def _tally(self, row: EvalResult) -> None:
        for tally in self._column_tallies()[row.step.prompt_idx]:
            tally.add(row)

    def to_promptfoo(self) -> dict:
        from factcli.report.results_json import to_promptfoo_json

        return to_promptfoo_json(self)


def new_run_id() -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"eval-{stamp}-{uuid.uuid4().hex[:6]}"


def prepare(suite: Suite, options: RunOptions) -> EvalRun:
    """The run of `suite`: its plan, settings and checks, with the suite's own filters in force."""
    with templating.filters_used(suite.filters):
        return _prepare(suite, options)


def _prepare(suite: Suite, options: RunOptions) -> EvalRun:
    eo = suite.evaluate_options
    repeat = options.repeat or int(eo.get("repeat") or 1)
    from factcli.run.planning.row_vars import plan_transforms

    from factcli.config.stream import facts_of

    # a suite loaded from CSV/JSONL files, streamed or held (config/stream.py): none of its tests has
    # transformVars, runSerially, storeOutputAs, select-best or max-score (its load made sure)
    streamed = facts_of(suite.tests) is not None
    if suite.transform_errors is None:  # transformVars, before var arrays become rows
        suite.transform_errors = {} if streamed else plan_transforms(suite.tests)
    vars_errors = suite.transform_errors
    cols, steps = expand(suite, repeat, pattern=options.filter_pattern, first_n=options.filter_first_n,
                         sample=options.filter_sample)
    concurrency = (options.max_concurrency or _env_concurrency()
                   or int(eo.get("maxConcurrency") or settings.DEFAULT_CONCURRENCY))
    delay = options.delay_ms if options.delay_ms is not None else float(eo.get("delay") or 0)
    if delay > 0:
        concurrency = 1  # promptfoo: a delay between calls implies one call at a time
    cache = options.cache if options.cache is not None else eo.get("cache", True) is not False
    if options.description:
        suite.description = options.description
    run = EvalRun(
        run_id=new_run_id(), suite=suite, columns=cols, metrics=[ColumnMetrics() for _ in cols],
        total_steps=len(steps), created_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        concurrency=concurrency, repeat=repeat, cache=cache, warnings=list(suite.warnings),
    )
    run.steps = Steps(steps)
    # what the load found and let pass, and what the checks below find: reported all together by
    # the preflight (run/planning/preflight.py), and never a call while any is left (execute)
    run.problems = list(getattr(suite, "problems", None) or [])
    run.conversations = _conversations(steps, streamed)
    run._delay = delay
    run._vars_errors = vars_errors
    run.max_cost = options.max_cost if options.max_cost is not None else eo.get("maxCost")
    from factcli.scoring.grading import GraderSource

    run.grader_source = GraderSource(cli=options.grader, default_test=(suite.default_test.get("options") or {}).get("provider"))
    run.graders = check_graders(suite, run.grader_source, run.warnings, run.grader_specs)
    from factcli.run.calling.batches import settings_of

    run.batch = settings_of(suite, options, run.grader_specs)  # None unless a call may go in a batch
    from factcli.config.var_check import check_vars

    unknown = check_vars(suite, run.problems)  # a near miss is a problem: nothing is sent
    run.warnings.extend(unknown.values())
    run._unknown_vars = set(unknown)  # said once, not again after the run
    run.warnings.extend(model_name_warnings(suite))
    from factcli.config.plan import expansion_warning

    expanded = expansion_warning(suite.tests)
    if expanded:
        run.warnings.append(expanded)
    if run.max_cost is not None:
        check_prices(suite, run.grader_specs)
    if len(cols) < 2 and not streamed:  # (such a suite has no select-best nor max-score)
        from factcli.errors import ConfigError

        for test in suite.tests:
            for i, a in enumerate(test.assertions):
                if a.type in COMPARING:
                    file, path = test.source
                    raise ConfigError(f"{a.type} compares the outputs of several providers or prompts, "
                                      "but this config has only one column", file or None, f"{path}.assert[{i}]")
    return run


def _conversations(steps, streamed: bool = False):
    """The plan's conversation threads and storeOutputAs registers (run/planning/conversations.py): made from
    every step, before --resume leaves out the finished ones, whose turns it puts back. A suite
    loaded from CSV/JSONL files (`streamed`: config/stream.facts_of) has neither runSerially nor
    storeOutputAs: unless a prompt reads `_conversation`, no step of it is in a thread, and its
    steps are not made to learn that."""
    from factcli.run.planning.conversations import Conversations, uses_conversation

    if streamed and not any(uses_conversation(c.prompt) for c in steps.cols):
        return Conversations([])
    return Conversations(steps)


async def execute(run: EvalRun, *, on_result: Callable[[EvalResult], None] | None = None,
                  warn: Callable[[str], None] | None = None) -> None:
    """Execute the run's steps, its suite's filters in force for every row (and no other run's: a
    ContextVar, which the tasks of the rows inherit)."""
    with templating.filters_used(run.suite.filters):
        await _execute(run, on_result, warn)


async def _execute(run: EvalRun, on_result: Callable[[EvalResult], None] | None,
                   warn: Callable[[str], None] | None) -> None:
    from factcli.errors import AbortRun
    from factcli.providers.registry import create_provider
    from factcli.run.calling.breaker import Breakers
    from factcli.run.calling.budget import Budget
    from factcli.run.calling.cache import ResponseCache
    from factcli.run.calling.caller import Caller, RetryPolicy
    from factcli.run.executor import Executor
    from factcli.run.calling.limits import Limiters

    suite = run.suite
    if run.problems:  # (the preflight reports them; a caller that skipped it gets them here)
        from factcli.errors import ConfigProblems

        raise ConfigProblems(run.problems)
    derived = compile_derived(suite.derived_metrics)
    timeout_ms = suite.evaluate_options.get("timeoutMs")
    budget = None
    if run.max_cost is not None:  # a resumed run's kept rows count against it too
        budget = Budget(float(run.max_cost), sum(m.cost + m.grader_cost for m in run.metrics))
    breakers = Breakers.from_settings(suite.evaluate_options)
    caller = Caller(ResponseCache() if run.cache else None,
                    RetryPolicy.from_env(timeout_s=float(timeout_ms) / 1000 if timeout_ms else None),
                    Limiters(run.concurrency), budget, cap=run.concurrency, breakers=breakers)
    providers = {i: create_provider(spec, suite.base_dir) for i, spec in enumerate(suite.providers)}
    breakers.models = {p.endpoint() for p in providers.values() if not p.in_process}

    def record(result: EvalResult) -> None:
        run.metrics[result.step.prompt_idx].add(result, derived)
        if on_result:
            on_result(result)
        run.keep(result)

    def warning(message: str) -> None:
        run.warnings.append(message)
        if warn:
            warn(message)

    from factcli.scoring.grading import Grader

    grader = Grader(caller, suite.base_dir, run.grader_source)
    hooks = None  # extension hooks: beforeEach/afterEach per row, afterAll after the last
    if getattr(suite, "extensions", None):
        from factcli.run.hooks import Hooks

        hooks = Hooks.of(suite)
        hooks.columns = run.columns
    batcher = None
    if run.batch is not None:  # batch mode: every row in flight, so that a stage's calls meet in one batch
        from factcli.run.calling.batches import Batcher

        b = run.batch
        batcher = caller.batches = Batcher(b["default"], b.get("journal"), b["retry"], b["detach"], b.get("on_state"))
    executor = Executor(caller, providers, delay_ms=run._delay,
                        concurrency=run.concurrency if batcher is None else max(run.concurrency, run.total_steps),
                        base_dir=suite.base_dir, grader=grader, eval_id=run.run_id,
                        vars_errors=run._vars_errors, conversations=run.conversations, hooks=hooks)
    run.started = time.time()
    try:
        if len(run.steps):  # before any paid call: an endpoint that is not there is stopped now
            from factcli.run.planning.preflight import reach

            await reach(breakers, [*providers.values(), *_grader_providers(run)])
        if breakers.trip is None and batcher is not None and batcher.detach:
            from factcli.run.calling.batches import until_detached

            if await until_detached(executor.run(run.steps, record), batcher):
                run.status = STATUS_WAITING  # (no abort reason: nothing went wrong)
        elif breakers.trip is None:
            await executor.run(run.steps, record)
        if breakers.trip is not None:  # rows it ended are kept as errors; --resume runs them again
            run.status = STATUS_INTERRUPTED
            run.trip = breakers.trip
            run.abort_reason = f"{breakers.trip.who()} was stopped by the circuit breaker: {breakers.trip.why}"
            run.abort_exit_code = breakers.trip.exit_code
        elif run.status == STATUS_WAITING:
            pass
        elif executor.stopped:
            run.status = STATUS_INTERRUPTED
            run.abort_reason = executor.stopped
        else:
            from factcli.assertions.compare import run_comparisons

            await run_comparisons(run, grader)
            if hooks is not None and hooks.has("afterAll"):  # a failing afterAll leaves the run resumable
                run.finalize()
                await hooks.after_all(run)
            run.status = STATUS_COMPLETE
    except AbortRun as exc:
        run.status = STATUS_ABORTED
        run.abort_reason = str(exc)
        run.abort_exit_code = exc.exit_code
    except asyncio.CancelledError:
        run.status = STATUS_INTERRUPTED
        raise
    finally:
        run.duration_ms = int((time.time() - run.started) * 1000)
        run.finalize()  # before the session stores the column metrics
        for message in executor.missing_var_warnings(skip=run._unknown_vars):
            warning(message)
        for message in caller.formats.notes() + caller.params.notes():
            warning(message)
        run.retries = caller.retries
        run.calls = caller.calls
        run.throttling = caller.limiters.report() if caller.limiters is not None else {}
        if batcher is not None:
            await batcher.aclose()
            if batcher.summary():
                run.batch["summary"] = batcher.summary() + (
                    f"; detached: `factcli eval --resume {run.run_id}` collects them (`factcli list` shows their "
                    "progress)" if run.status == STATUS_WAITING else "")
                run.batch["rounds"] = {r: len(ids) for r, ids in batcher.rounds.items()}
        if caller.cache is not None:
            caller.cache.close()
        import sys

        if "factcli.providers.openai_provider" in sys.modules:
            from factcli.providers.openai_provider import aclose_all

            await aclose_all()


def _grader_providers(run: EvalRun) -> list:
    """The graders (and embedding models) the run may call, for the preflight's connections. (A run with
    no grader imports no provider module for it: an echo run stays as light as it was.)"""
    from factcli.providers.registry import create_provider

    out = []
    for spec, kind in run.grader_specs:
        try:
            if kind == "embedding":
                from factcli.providers.embedding import EmbeddingProvider

                out.append(EmbeddingProvider(spec, run.suite.base_dir))
            else:
                out.append(create_provider(spec, run.suite.base_dir))
        except Exception:  # noqa: BLE001 - a grader that cannot be made is the load's and the row's to report
            continue
    return out


def load(config, options: RunOptions | None = None) -> Suite:
    options = options or RunOptions()
    with downloads(options):
        if isinstance(config, dict):
            return build_suite(with_providers(config, options.providers), None, options.vars)
        paths = [config] if isinstance(config, (str, Path)) else list(config)
        return load_suite(paths, options.vars, options.providers)


@contextmanager
def downloads(options: RunOptions):
    """Tests a config downloads while it loads are kept in the download cache (--no-cache: fetched again)."""
    from factcli.config.remote import downloading
    from factcli.run.calling.cache import DownloadCache

    store = DownloadCache(refresh=options.cache is False)
    try:
        with downloading(store):
            yield
    finally:
        store.close()


def _env_concurrency() -> int | None:
    value = os.environ.get("FACTCLI_MAX_CONCURRENCY", "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        from factcli.errors import FactcliError

        raise FactcliError(f"FACTCLI_MAX_CONCURRENCY: expected a whole number of at least 1, got {value!r}")
    return int(value)
