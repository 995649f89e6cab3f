"""`factcli eval`: run a config (or score existing outputs), store the run, print the table, pick the exit code."""

from __future__ import annotations

from pathlib import Path

import typer

from factcli.cli.app import DB_HELP, app, fail, one_line
from factcli.errors import FactcliError


@app.command("eval")
def eval_cmd(
    config: list[Path] = typer.Option(None, "-c", "--config", metavar="FILE", help="Config file(s); merged in order. "
                                      "Default: promptfooconfig.yaml/.yml/.json in the current directory."),
    output: list[Path] = typer.Option(None, "-o", "--output", metavar="FILE", help="Write results; format from the extension: "
                                      ".json (promptfoo layout), .jsonl, .yaml, .csv, .xml, .junit.xml, .html. "
                                      "Repeatable."),
    max_concurrency: int | None = typer.Option(None, "-j", "--max-concurrency", metavar="N", min=1,
                                                  help="Calls in flight at once (default 4)."),
    repeat: int | None = typer.Option(None, "--repeat", metavar="N", min=1, help="Run every test N times."),
    delay: float | None = typer.Option(None, "--delay", metavar="MS", min=0, help="Milliseconds to wait after each "
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
    filter_first_n: int | None = typer.Option(None, "--filter-first-n", metavar="N", min=0, help="Only the first N tests."),
    filter_sample: int | None = typer.Option(None, "--filter-sample", metavar="N", min=0, help="A random sample of N tests."),
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
    filter_failing: str | None = typer.Option(None, "--filter-failing", metavar="RUN", help="Only the tests "
                                                 "that failed or errored in a stored run (id, prefix or 'latest')."),
    max_cost: float | None = typer.Option(None, "--max-cost", min=0, metavar="USD", help="A hard budget: start "
                                             "no call that could take the run's cost past it (resumable)."),
    strict: bool = typer.Option(False, "--strict", help="Refuse a config with unknown keys (normally one "
                                "warning each) before any call."),
    providers: list[str] = typer.Option(None, "-r", "--providers", metavar="ID", help="Run these providers "
                                        "instead of the config's (promptfoo's flag). Repeatable."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check everything, print the calls and the cost "
                                 "range the run would have, and stop before any call."),
) -> None:
    """Run an eval: prompts x providers x tests, scored by the config's assertions."""
    from factcli.errors import FactcliError

    code = 1
    try:
        code = _run_eval(locals())
    except FactcliError as exc:
        fail(str(exc), exc.exit_code, getattr(exc, "problems", ()), exc.excerpt)
    raise typer.Exit(code)


def _run_eval(args: dict) -> int:
    from factcli import settings
    from factcli.errors import FactcliError
    from factcli.report import summary as report
    from factcli.run import runner

    if args["env_file"]:
        settings.load_env_file(str(args["env_file"]))
    outputs = [Path(p) for p in (args["output"] or [])]
    cli_vars = {}
    for item in args["var"] or []:
        if "=" not in item:
            raise FactcliError(f"--var {item!r}: expected K=V")
        k, v = item.split("=", 1)
        cli_vars[k] = v
    options = runner.RunOptions(
        max_concurrency=args["max_concurrency"], repeat=args["repeat"], delay_ms=args["delay"],
        cache=False if args["no_cache"] else None, filter_pattern=args["filter_pattern"],
        filter_first_n=args["filter_first_n"], filter_sample=args["filter_sample"],
        description=args["description"], vars=cli_vars, grader=args["grader"], max_cost=args["max_cost"],
        providers=list(args["providers"] or []) or None,
    )
    if (args["assertions"] is None) != (args["model_outputs"] is None):
        raise FactcliError("--assertions and --model-outputs go together")
    from factcli.run.session import EvalSession

    session = EvalSession.open(args, options)
    outputs = session.outputs(outputs) if session.source_options else outputs
    if session.suite is not None:
        suite = session.suite
    elif args["assertions"] is not None:
        from factcli.config.model_outputs import suite_from_outputs

        suite = suite_from_outputs(args["assertions"], args["model_outputs"], cli_vars)
    else:
        from factcli.config.loader import default_config_path

        paths = list(args["config"] or [])
        if not paths:
            found = default_config_path()
            if found is None:
                raise FactcliError("no config: pass -c FILE, or run where promptfooconfig.yaml is")
            paths = [found]
        with report.working("Reading the config…", not args["no_progress_bar"]):  # and what it downloads
            suite = runner.load(paths, options)
    _load_warnings(suite, args["strict"])  # every way of loading: config, resumed run, --model-outputs
    if args["filter_pattern"]:
        import re

        try:
            re.compile(args["filter_pattern"])
        except re.error as exc:
            raise FactcliError(f"--filter-pattern: invalid regex: {exc}")
    shown = len(suite.warnings)  # printed above; the run keeps them with its other warnings
    checked, suite = _before_all(session, suite, options, outputs, args)
    session.filter_suite(suite)
    run = runner.prepare(suite, options)
    run.warnings_shown = shown
    if not checked:  # (a beforeAll that changed nothing leaves the checked suite)
        _preflight(run, outputs + [Path(p) for p in suite.output_path], args)
    if args["dry_run"]:
        from factcli.run.estimate import describe

        for line in describe(run):
            print(line)
        if suite.extensions:
            print("Extension hooks are not called in a dry run (a beforeAll hook may change the tests).")
        return 0
    session.begin(run)
    from factcli.run.session import drive

    interrupted = drive(session, run, progress_bar=not args["no_progress_bar"])
    from rich.console import Console

    console = Console(highlight=False)
    if not args["no_table"]:
        report.results_table(run, console)
    report.summary(run, console)
    for path in outputs + [Path(p) for p in suite.output_path]:
        from factcli.report.exports import write_export

        with report.working(f"Writing {path}…", not args["no_progress_bar"]):
            write_export(run, path)
        console.print(f"Wrote {path}")
    budget_stop = run.status == runner.STATUS_INTERRUPTED and not interrupted  # says its own resume line
    from rich.text import Text

    for line in report.next_steps_for(run, stored=session.writing, interrupted=interrupted, db=args.get("db")):
        if not (budget_stop and line.startswith("Resume")):
            console.print(Text(line, style="dim"), soft_wrap=True)
    if interrupted:
        report.stderr_console().print("[yellow]Interrupted:[/] finished rows were kept.")
        return 130
    if run.status == runner.STATUS_INTERRUPTED:  # the budget: calls in flight finished, no more started
        from rich.markup import escape

        report.stderr_console().print(f"[yellow]Stopped:[/] {escape(run.abort_reason or '')}. {run.row_count} of "
                                      f"{run.total_steps} rows finished and were kept; go on with a larger budget: "
                                      f"factcli eval --resume {run.run_id} --max-cost USD", soft_wrap=True)
        return 130
    if run.status == runner.STATUS_ABORTED:
        code = getattr(run, "abort_exit_code", 3)
        if code == 1:  # a user's extension hook failed (run/hooks.py)
            from rich.markup import escape

            report.stderr_console().print(f"error: {escape(one_line(run.abort_reason or ''))}", soft_wrap=True)
        return code
    return exit_code_for(run)


def _before_all(session, suite, options, outputs: list[Path], args: dict):
    """Extension hooks' beforeAll, before the run is planned (its tests are the config's, not yet
    filtered or expanded) and after a preflight of the config as loaded, so that a config that cannot
    run calls no hook. Returns (whether the returned suite was checked, the suite beforeAll left);
    a dry run calls no hook."""
    from factcli.run.hooks import Hooks

    hooks = Hooks.of(suite)
    if hooks is None or not hooks.has("beforeAll") or args["dry_run"]:
        return False, suite
    import dataclasses

    from factcli.run import runner

    # the preflight's plan leaves transformVars to the tests beforeAll gives back (they run once per test)
    probe = runner.prepare(dataclasses.replace(suite, transform_errors={}), options)
    _preflight(probe, outputs + [Path(p) for p in suite.output_path], args)
    hooked = hooks.before_all(suite)
    session.select_tests(hooked)  # a resumed run: its tests are among those beforeAll gave
    return hooked is suite, hooked


class UnknownKeys(FactcliError):
    """--strict: the unknown keys are the problems, one line each."""

    def __init__(self, lines: list[str]):
        self.problems = lines if len(lines) > 1 else []
        super().__init__(f"{len(lines)} unknown or ignored keys (--strict; nothing was sent):" if len(lines) > 1
                         else f"{lines[0]} (--strict; nothing was sent)")


def _load_warnings(suite, strict: bool) -> None:
    """What loading found (unknown keys first), on stderr before the preflight and any call; with
    --strict an unknown key stops the run instead."""
    if strict and suite.unknown_keys:
        import re

        raise UnknownKeys([re.sub(r" \(ignored( here)?\)", "", line) for line in suite.unknown_keys])
    from rich.markup import escape

    from factcli.report.summary import stderr_console

    for message in suite.warnings:  # a key may be any text: one printable line each
        stderr_console().print(f"[yellow]warning:[/] {escape(one_line(message))}", soft_wrap=True)


def _preflight(run, outputs: list[Path], args: dict) -> None:
    """Every check that costs nothing, before the first call; a spinner while litellm loads."""
    from factcli.report.summary import working
    from factcli.run import preflight

    filters = {"--filter-pattern": args["filter_pattern"], "--filter-first-n": args["filter_first_n"],
               "--filter-sample": args["filter_sample"], "--filter-failing": args["filter_failing"]}
    with working("Checking models, graders, outputs and knowledge sources before any call…",
                 not args["no_progress_bar"]):
        preflight.check(run, outputs, filters)


def exit_code_for(run) -> int:
    """0 when the pass rate reaches FACTCLI_PASS_RATE_THRESHOLD (percent, default 100), else 100."""
    from factcli.settings import env_float

    threshold = env_float("FACTCLI_PASS_RATE_THRESHOLD", 100.0)
    failed_code = int(env_float("FACTCLI_FAILED_TEST_EXIT_CODE", 100))
    rate = run.pass_rate
    if rate is None or rate * 100 >= threshold:
        return 0
    return failed_code
