"""`factcli eval`: run a config (or score existing outputs), store the run, print the table, pick the exit code."""

# No `from __future__ import annotations` here: typer reads eval_cmd's 27 parameter types on every
# `factcli eval`, and as strings each would be compiled and evaluated then, on every start (issue 30).

from pathlib import Path

import typer

from factcli.cli.root import DB_HELP, app, fail, one_line, rows_running, start_up
from factcli.errors import FactcliError
from factcli.run.options import minimum  # each number option's least value, declared with the option


@app.command("eval")
def eval_cmd(
    config: list[Path] = typer.Option(None, "-c", "--config", metavar="FILE", help="Config file(s); merged in order. "
                                      "Default: promptfooconfig.yaml/.yml/.json in the current directory."),
    output: list[Path] = typer.Option(None, "-o", "--output", metavar="FILE", help="Write results; format from the extension: "
                                      ".json (promptfoo layout), .jsonl, .yaml (.txt: YAML), .csv, .xml, .junit.xml, "
                                      ".html; missing folders are made. Replaces the config's outputPath. "
                                      "Repeatable."),
    max_concurrency: int | None = typer.Option(None, "-j", "--max-concurrency", metavar="N",
                                               min=minimum("max_concurrency"),
                                                  help="The most calls in flight at once for the whole run: "
                                                  "model, grader, embedding and search calls together, the "
                                                  "claim-level methods' included; each endpoint's maxConcurrency, "
                                                  "rpm and tpm apply under it. Also the rows run at once. "
                                                  "Default 4 (docs/commands.md: -j)."),
    repeat: int | None = typer.Option(None, "--repeat", metavar="N", min=minimum("repeat"),
                                      help="Run every test N times."),
    delay: float | None = typer.Option(None, "--delay", metavar="MS", min=minimum("delay_ms"),
                                       help="Milliseconds to wait after each "
                                          "call; implies -j 1."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the response cache."),
    no_table: bool = typer.Option(False, "--no-table", help="Do not print the results table."),
    no_progress_bar: bool = typer.Option(False, "--no-progress-bar", help="Do not show the progress bar."),
    grader: str | None = typer.Option(None, "--grader", metavar="PROVIDER", help="Provider that grades model-graded assertions "
                                         "(below an assertion's or a test's own provider)."),
    env_file: Path | None = typer.Option(None, "--env-file", metavar="FILE", help="Load environment variables from a "
                                            "dotenv file (variables already set win)."),
    var: list[str] = typer.Option(None, "--var", metavar="K=V", help="Set a test var for every test: --var K=V. Repeatable."),
    description: str | None = typer.Option(None, "--description", metavar="TEXT", help="Describe this run."),
    filter_pattern: str | None = typer.Option(None, "--filter-pattern", metavar="REGEX",
                                                 help="Only tests whose description matches this regex."),
    filter_first_n: int | None = typer.Option(None, "--filter-first-n", metavar="N", min=minimum("filter_first_n"),
                                              help="Only the first N tests."),
    filter_sample: int | None = typer.Option(None, "--filter-sample", metavar="N", min=minimum("filter_sample"),
                                             help="A random sample of N tests."),
    assertions: Path | None = typer.Option(None, "--assertions", metavar="FILE", help="Assertions file (a YAML/JSON list) "
                                              "to score existing outputs; use with --model-outputs."),
    model_outputs: Path | None = typer.Option(None, "--model-outputs", metavar="FILE", help="JSON list of outputs "
                                                 "(strings or {output, tags}) to score with --assertions."),
    db: str | None = typer.Option(None, "--db", metavar="DB", help=DB_HELP),
    no_write: bool = typer.Option(False, "--no-write", help="Do not store this run."),
    resume: str | None = typer.Option(None, "--resume", metavar="RUN", help="Finish an interrupted run "
                                         "(id, prefix or 'latest') with its stored config; finished rows are kept."),
    retry_errors: str | None = typer.Option(None, "--retry-errors", metavar="RUN", help="Re-run only the "
                                               "ERROR rows of a stored run (id, prefix or 'latest')."),
    trust_stored_config: bool = typer.Option(False, "--trust-stored-config", "--trust-stored-code",
                                             help="With --resume or --retry-errors: take what the store says "
                                             "(a stored config that is not your config file, its code, files, "
                                             "endpoints, output paths, --var/--providers/--grader), once factcli "
                                             "has listed it (refused otherwise, since anyone who can write the "
                                             "store may have put it there). --trust-stored-code is its older name."),
    filter_failing: str | None = typer.Option(None, "--filter-failing", metavar="RUN", help="Only the tests "
                                                 "that failed or errored in a stored run (id, prefix or 'latest')."),
    max_cost: float | None = typer.Option(None, "--max-cost", min=minimum("max_cost"), metavar="USD",
                                          help="A hard budget: start "
                                             "no call that could take the run's cost past it (resumable)."),
    strict: bool = typer.Option(False, "--strict", help="Refuse a config with unknown keys (normally one "
                                "warning each) before any call."),
    providers: list[str] = typer.Option(None, "-r", "--providers", metavar="ID", help="Run these providers "
                                        "instead of the config's (promptfoo's flag). Repeatable."),
    gate: list[str] = typer.Option(None, "--gate", metavar="'METRIC>=X'", help="A release gate over the config's "
                                   "gates: a named metric, pass-rate, score (>= X), cost or latency (<= X); "
                                   "METRIC[lower]>=X holds the 95% interval's lower end. A failed gate exits "
                                   "100. Repeatable."),
    batch: bool = typer.Option(False, "--batch", help="Send model and grader calls through the providers' "
                               "batch APIs (OpenAI, Anthropic): billed at the batch price (half), answered "
                               "within 24 h; a stage's calls of all rows go in one batch (docs/batch.md)."),
    detach: bool = typer.Option(False, "--detach", help="With --batch: submit the batches, store the run as "
                                "waiting and exit; collect with --resume RUN."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check everything, print the calls and the cost "
                                 "range the run would have, and stop before any call."),
) -> None:
    """Run an eval: prompts x providers x tests, scored by the config's assertions."""
    from factcli.errors import FactcliError
    from factcli.run.options import EvalOptions, RunOptions

    code = 1
    try:
        options = EvalOptions(
            config=list(config or []) or None,
            run=RunOptions(max_concurrency=max_concurrency, repeat=repeat, delay_ms=delay,
                           cache=False if no_cache else None, vars=_vars(var), grader=grader,
                           max_cost=max_cost, providers=list(providers or []) or None,
                           filter_pattern=filter_pattern, filter_first_n=filter_first_n,
                           filter_sample=filter_sample, description=description,
                           batch=True if batch else None, detach=detach),
            outputs=list(output or []), store=not no_write, db=db, resume=resume, retry_errors=retry_errors,
            filter_failing=filter_failing, assertions=assertions, model_outputs=model_outputs, strict=strict,
            dry_run=dry_run, env_files=[env_file] if env_file else [], gates=list(gate or []),
            trust_stored_config=trust_stored_config, table=not no_table, progress_bar=not no_progress_bar)
        code = _run_eval(options)
    except FactcliError as exc:
        fail(str(exc), exc.exit_code, getattr(exc, "problems", ()), exc.excerpt)
    raise typer.Exit(code)


def _vars(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise FactcliError(f"--var {item!r}: expected K=V")
        k, v = item.split("=", 1)
        out[k] = v
    return out


def _run_eval(options) -> int:
    """The options (run/options.EvalOptions) under the configs' commandLineOptions; the flow
    (run/flow.py) does the rest, this module prints."""
    from factcli.run.flow import Flow

    with start_up():  # the imports, the config and the plan, up to the first row
        options = _with_config_options(options)
        flow = Flow(options, TerminalUI(progress_bar=options.progress_bar))
        run = flow.prepare()
    return _print_eval(flow, run)


def _with_config_options(options):
    """The configs' `commandLineOptions` in the options the flags left unset (config/cli_options.py); a
    resumed or retried run keeps the options it was started with, and --assertions runs no config."""
    if options.resume or options.retry_errors or options.assertions is not None:
        return options
    from factcli.config.loader import default_config_path, read_config_file

    files = list(options.config or []) or [p for p in [default_config_path()] if p is not None]
    if not files:
        return options
    from factcli.config import cli_options

    return options.filled(cli_options.values([(Path(p), read_config_file(Path(p))) for p in files]))


def _print_eval(flow, run) -> int:
    import asyncio

    from factcli.report import summary as report
    from factcli.run import runner

    options = flow.options
    if options.dry_run:
        from factcli.run.planning.estimate import describe

        for line in describe(run):
            print(line)
        from factcli.config.stored_trust import what_it_would_do

        does = what_it_would_do(flow.suite.raw)  # by the config-key table, as a resume from the store lists it
        if does:
            print("Besides its calls, the config would (what a resume from the store would need trusted for):")
            for line in does:
                print(f"  - {line}")
        if flow.suite.extensions:
            print("Extension hooks are not called in a dry run (a beforeAll hook may change the tests).")
        return 0
    interrupted = False
    try:
        with rows_running():
            asyncio.run(flow.execute())
    except KeyboardInterrupt:  # finished rows are stored; the run is resumable
        interrupted = True
        run.status = runner.STATUS_INTERRUPTED
    console = flow.ui.console
    if options.table:
        report.results_table(run, console)
    report.summary(run, console)
    flow.write_outputs()
    budget_stop = run.status == runner.STATUS_INTERRUPTED and not interrupted  # says its own resume line
    from rich.text import Text

    for line in report.next_steps_for(run, stored=flow.stored, interrupted=interrupted, db=options.db,
                                      outputs=options.outputs):
        if not (budget_stop and line.startswith("Resume")):
            console.print(Text(line, style="dim"), soft_wrap=True)
    unstored = flow.session.unstored if flow.session is not None else None
    if unstored is not None:  # the store went away and did not come back: exit 1 (docs/commands.md)
        return _unstored(run, unstored, options)
    refused = flow.session.unstorable if flow.session is not None else []
    if refused:  # rows the store refused for good (run/recording/outage.permanent): the run is stored without them
        places = ", ".join(p for p, _ in refused[:5]) + (", …" if len(refused) > 5 else "")
        report.stderr_console().print(f"error: the store refused {len(refused)} row{'s' if len(refused) != 1 else ''} "
                                      f"({places}): {one_line(refused[0][1])}; every other row is stored",
                                      markup=False, soft_wrap=True)
        return 1
    if interrupted:
        report.stderr_console().print("[yellow]Interrupted:[/] finished rows were kept.")
        return 130
    if run.status == runner.STATUS_INTERRUPTED and run.trip is not None:  # an endpoint stopped (run/calling/breaker.py)
        from rich.markup import escape

        again = report.resume_command(run.run_id, db=options.db, outputs=options.outputs)
        report.stderr_console().print(f"[yellow]Stopped:[/] {escape(run.abort_reason or '')}. {run.row_count} of "
                                      f"{run.total_steps} row{'s' if run.total_steps != 1 else ''} stored; once it "
                                      f"answers again: {escape(again)} (runs the rest and the rows that errored)",
                                      soft_wrap=True)
        return run.abort_exit_code
    if run.status == runner.STATUS_INTERRUPTED:  # the budget: calls in flight finished, no more started
        from rich.markup import escape

        again = report.resume_command(run.run_id, db=options.db, outputs=options.outputs) + " --max-cost USD"
        report.stderr_console().print(f"[yellow]Stopped:[/] {escape(run.abort_reason or '')}. {run.row_count} of "
                                      f"{run.total_steps} row{'s' if run.total_steps != 1 else ''} finished and were "
                                      f"kept; go on with a larger budget: {escape(again)}", soft_wrap=True)
        return 130
    if run.status == runner.STATUS_ABORTED:
        code = run.abort_exit_code
        if code == 1:  # a user's extension hook failed (run/hooks.py)
            from rich.markup import escape

            report.stderr_console().print(f"error: {escape(one_line(run.abort_reason or ''))}", soft_wrap=True)
        return code
    return exit_code_for(run)


def _unstored(run, unstored: tuple, options) -> int:
    """The store was gone at the end of the run: every row is in the table and the -o files; say
    which rows the store lacks and how to write them there, as this run's options make it true (no
    table under --no-table, no cached replies under --no-cache)."""
    from factcli.report.summary import resume_command, stderr_console
    from factcli.store.database import shown

    db = options.db
    n, tests, error = unstored
    again = resume_command(run.run_id, db=db, outputs=options.outputs or ())
    kept = [where for where, shown_there in (("the table above", options.table), ("the -o files", options.outputs))
            if shown_there]
    where = (f"Every row is in {' and '.join(kept)}. " if kept
             else "The rows are in no table or file (--no-table, no -o). ")
    paid = ("their replies come from the response cache, so no model is paid again" if run.cache else
            "--no-cache kept no reply, so their models are called again")
    stderr_console().print(
        f"error: {shown(db)} did not take {n} of this run's {run.total_steps} rows ({tests}): "
        f"{one_line(str(error))}. {where}Once the store is back, `{again}` stores them ({paid}).",
        markup=False, soft_wrap=True)
    return 1


class TerminalUI:
    """The flow on a terminal (run/flow.FlowUI's methods): notes and warnings on stderr, a spinner while
    checking and writing, a progress bar."""

    refuse_empty_filters = True

    def __init__(self, progress_bar: bool):
        from factcli.report.summary import Console

        self.progress_bar = progress_bar
        self.console = Console(highlight=False)  # stdout: the table, the summary, what was written

    def option(self, name: str) -> str:
        return "--" + name.replace("_", "-")

    def loaded(self, suite) -> None:
        """What loading found (unknown keys first), on stderr before the preflight and any call."""
        from factcli.report.summary import print_warning

        for message in suite.warnings:  # a key may be any text: one printable line each
            print_warning(one_line(message))

    def warn(self, message: str) -> None:
        from factcli.report.summary import print_warning

        print_warning(message)

    def note(self, message: str) -> None:
        from factcli.report.summary import print_note

        print_note(message)

    def working(self, message: str):
        from factcli.report.summary import working

        return working(message, self.progress_bar)

    def progress(self, run):
        from factcli.report.summary import Progress

        progress = Progress(run.total_steps, enabled=self.progress_bar, done=run.metrics)
        if run.batch is not None:  # batch mode: a bar per round while it waits (run/calling/batches.py)
            run.batch["on_state"] = progress.batch_state
        return progress.advance, progress.warn, progress.stop

    def wrote(self, path: Path) -> None:
        self.console.print(f"Wrote {path}")


EXIT_NOT_JUDGED = 4  # contract §2: passed on the rows judged, but some rows could not be judged


def exit_code_for(run) -> int:
    """100 when the pass rate of the rows judged is below FACTCLI_PASS_RATE_THRESHOLD (percent, default
    100, or none when the run has gates and the variable is not set), or a gate failed (run/recording/gates.py:
    a provider error in a gated run, a failed critical test included); else 4 when some assertions could
    not be judged (the judge failed them: --retry-errors re-runs them) or a gate was not judged; else 0.
    100 wins over 4: a release that is worse on the rows judged is worse."""
    import os

    from factcli.settings import env_float

    # with gates, they decide: the implicit 100% does not apply (a pass-rate gate says what does)
    gated = bool(run.gates) and not os.environ.get("FACTCLI_PASS_RATE_THRESHOLD")
    threshold = None if gated else env_float("FACTCLI_PASS_RATE_THRESHOLD", 100.0)
    failed_code = int(env_float("FACTCLI_FAILED_TEST_EXIT_CODE", 100))
    rate = run.pass_rate
    if rate is not None and threshold is not None and rate * 100 < threshold:
        return failed_code
    if any(g.passed is False for g in run.gate_results):
        return failed_code
    # an assertion not judged on a row its others decided counts too, as does a gate too few rows were
    # judged for (contract §2: such a gate is "not judged", never passed or failed)
    unjudged = run.unjudged or any(m.grading_errors for m in run.metrics) or any(
        g.passed is None for g in run.gate_results)
    return EXIT_NOT_JUDGED if unjudged else 0
