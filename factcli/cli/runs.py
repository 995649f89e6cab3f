"""Commands over stored runs: view, list, show, diff, export, delete (registered on factcli.cli.root.app).

Only typer is imported here; the store, rich and the renderers are imported inside the commands so
that `factcli --help` stays fast.
"""

# No `from __future__ import annotations`: typer reads the commands' parameter types as each starts, and
# strings it would compile and evaluate first (as in eval_cmd.py).

import contextlib
from pathlib import Path
from typing import List, Optional

import typer

from factcli.cli.root import DB_HELP, app, fail

RUN_HELP = ("A run id, 'latest', or a unique part of an id: its start (eval-20261124T19) or its "
            "hex tail (9a84d9).")


@contextlib.contextmanager
def _store(db: Optional[str], create: bool = False):
    """Open the store; any problem with it, or an unknown run, is one line and exit 1."""
    from factcli.errors import FactcliError
    from factcli.store.database import Store, redact, shown, store_errors

    store = None
    try:
        store = Store.open(db, create=create)
        yield store
    except FactcliError as exc:
        fail(str(exc), exc.exit_code)
    except store_errors() as exc:
        fail(f"{shown(db)}: database error: {redact(' '.join(str(exc).split()))}")
    finally:
        if store is not None:
            try:
                store.close()
            except store_errors():
                pass


@app.command("view")
def view_cmd(
    run: str = typer.Argument("latest", metavar="RUN", help=RUN_HELP),
    failures: bool = typer.Option(False, "--failures", help="Only tests with a failed row."),
    errors: bool = typer.Option(False, "--errors", help="Only tests with an ERROR row."),
    filter_text: Optional[str] = typer.Option(None, "--filter", metavar="TEXT",
                                              help="Only tests with a row whose output, error or "
                                                   "failure reason, vars or description contains TEXT "
                                                   "(case-insensitive)."),
    limit: int = typer.Option(50, "--limit", metavar="N", min=1, help="Tests per page."),
    page_no: int = typer.Option(1, "--page", metavar="N", min=1, help="Page to show (1 is the first)."),
    full: bool = typer.Option(False, "--full", help="Whole outputs and reasons, every column."),
    as_json: bool = typer.Option(False, "--json", help="Print the page as JSON."),
    db: Optional[str] = typer.Option(None, "--db", metavar="DB", help=DB_HELP),
    web: bool = typer.Option(False, "--web", help="Serve the store as a local web page (runs, the results "
                             "matrix, cells, compare, ratings) until Ctrl-C."),
    port: Optional[int] = typer.Option(None, "--port", metavar="N", min=1, max=65535,
                                       help="With --web: the port (default 15510, or a free one when it is taken)."),
    host: str = typer.Option("127.0.0.1", "--host", metavar="H", help="With --web: the address to listen on. "
                             "0.0.0.0 lets anyone on the network read the results."),
    no_open: bool = typer.Option(False, "--no-open", help="With --web: do not open a browser."),
    token: Optional[str] = typer.Option(None, "--token", metavar="TOKEN",
                                        help="With --web: every request must carry this token (Authorization: "
                                             "Bearer TOKEN, or the sign-in page); required with a --host other "
                                             "than loopback. Default: FACTCLI_WEB_TOKEN."),
    allowed_host: List[str] = typer.Option(None, "--allowed-host", metavar="NAME",
                                           help="With --web: a Host name to answer besides loopback and --host "
                                                "(the name a proxy or the network uses for this machine). "
                                                "Repeatable."),
) -> None:
    """Show a stored run as a table: tests as rows, prompt x provider as columns (--web: as a local web page)."""
    from factcli.report import view as viewer

    if web:
        if as_json:
            fail("--json and --web do not go together: --web serves pages, --json prints one page")
        _serve_web(db, run, host=host, port=port, open_browser=not no_open, token=token,
                   query={"failures": failures, "errors": errors, "q": filter_text}, allowed=allowed_host or [])
        return
    if port is not None or no_open or host != "127.0.0.1" or token is not None or allowed_host:
        fail("--port, --host, --allowed-host, --no-open and --token go with --web")
    filtered = failures or errors or bool(filter_text)
    with _store(db) as store:
        row = store.resolve(run)
        header = viewer.run_header(store, row)
        info = viewer.page(store, row, failures=failures, errors=errors, text=filter_text, limit=limit,
                           page_no=page_no, full=full)
        summaries = viewer.column_summaries(store, row)
    if info["total"] and not info["tests"]:  # a page past the end is a mistake, not an empty page
        pages, total = info["pages"], info["total"]
        fail(f"page {page_no} is past the end: this run has {pages} page{'s' if pages != 1 else ''} of "
             f"{total} {'matching ' if filtered else ''}test{'s' if total != 1 else ''} ({limit} a page)")
    if as_json:
        doc = {"run": header, "columns": summaries, **info}
        for t in doc["tests"]:
            t["cells"] = [t["cells"][k] for k in sorted(t["cells"])]
        viewer.print_json(doc)
        return
    from rich.text import Text

    from factcli.report import grid

    console, terminal = viewer.console_for_stdout()
    viewer.render_header(console, header, page_info=info)
    if info["tests"]:
        grid.render_table(console, summaries, info, full=full, terminal=terminal)
        legend = grid.claims_legend(info)
        if legend:
            console.print(Text(legend, style="dim"))
    else:
        console.print("No rows match." if filtered else "No rows stored yet.")
    viewer.render_footer(console, summaries, terminal)
    if info["tests"]:
        first = _first_failed(info) if _first_failed(info) is not None else info["tests"][0]["testIdx"]
        # commands are printed unbroken (soft wrap): a line break inside one would break a paste
        console.print(Text(f"Open a row in full: factcli show {row['id']} {first}" + _db_flag(db), style="dim"),
                      soft_wrap=True)
    if info["pages"] > page_no:
        import shlex

        flags = ["--failures"] * failures + ["--errors"] * errors + (["--filter", filter_text] if filter_text else [])
        flags += (["--limit", str(limit)] if limit != 50 else []) + (["--full"] if full else [])
        console.print(Text(f"Next page: factcli view {row['id']} --page {page_no + 1}"
                           + "".join(f" {shlex.quote(f)}" for f in flags) + _db_flag(db), style="dim"),
                      soft_wrap=True)


def _serve_web(db: Optional[str], run: str, *, host: str, port: Optional[int], open_browser: bool,
               query: dict, token: Optional[str] = None, allowed: list | tuple = ()) -> None:
    """`view --web`: check the token, the store and the run here (a bad one is one line and exit 1), then serve."""
    from urllib.parse import quote, urlencode

    from factcli.errors import FactcliError
    from factcli.web import server

    import os

    try:
        token = server.check_token(host, token if token is not None else os.environ.get("FACTCLI_WEB_TOKEN"))
    except FactcliError as exc:
        fail(str(exc), exc.exit_code)
    with _store(db) as store:
        target = store.target
        row = store.resolve(run)
    shown = {k: (1 if v is True else v) for k, v in query.items() if v}
    page = f"/runs/{quote(row['id'], safe='')}" + (f"?{urlencode(shown)}" if shown else "")
    try:
        chosen, note = server.pick_port(host, port)
    except FactcliError as exc:
        fail(str(exc), exc.exit_code)
    warning = server.exposed_warning(host, token)
    if warning:
        typer.secho(warning, fg="yellow", err=True)
    if note:
        typer.echo(note)
    server.serve(target, host=host, port=chosen, path=page, open_browser=open_browser, echo=typer.echo, token=token,
                 allowed=allowed)


def _first_failed(info: dict) -> int | None:
    """The first test of the page with a FAIL (else an ERROR) cell: the row most worth opening."""
    for status in ("FAIL", "ERROR"):
        for t in info["tests"]:
            if any(c["status"] == status for c in t["cells"].values()):
                return t["testIdx"]
    return None


def _db_flag(db: str | None) -> str:
    if db is None:
        return ""
    import shlex

    from factcli.store.database import shown

    return f" --db {shlex.quote(shown(db))}"


@app.command("list")
def list_cmd(
    n: int = typer.Option(20, "-n", metavar="N", min=1, help="How many runs, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print the runs as JSON."),
    db: Optional[str] = typer.Option(None, "--db", metavar="DB", help=DB_HELP),
) -> None:
    """List stored runs, newest first."""
    from factcli.report import view as viewer
    from factcli.store.database import default_target, is_url, shown_status

    path = db or default_target()
    if db is None and not is_url(path) and not path.exists():
        typer.echo("[]" if as_json else f"No runs stored yet ({path}).")
        return
    with _store(db) as store:
        runs = store.list_runs(n)
        open_ids = [r["id"] for r in runs if not r.get("finished_at")]
        counts = {}
        for rid in open_ids:
            counts[rid] = store.result_count(rid)
        not_judged = {r["id"]: store.not_judged(r["id"]) for r in runs}  # out of the pass rate
        waiting = _waiting(store, [r["id"] for r in runs if r.get("status") in ("waiting", "started", "interrupted")])
    if as_json:
        import json

        out = []
        for r in runs:
            done = counts.get(r["id"], (r.get("successes") or 0) + (r.get("failures") or 0) + (r.get("errors") or 0))
            out.append({"id": r["id"], "createdAt": r["created_at"], "finishedAt": r["finished_at"],
                        "status": shown_status(r), "description": r["description"], "rows": done,
                        "totalRows": r["total_steps"], "successes": r["successes"], "failures": r["failures"],
                        "errors": r["errors"], "notJudged": not_judged[r["id"]], "durationMs": r["duration_ms"],
                        "configFiles": json.loads(r["config_files_json"] or "[]"),
                        **({"waitingOn": waiting[r["id"]]} if r["id"] in waiting else {})})
        viewer.print_json(out)
        return
    if not runs:
        typer.echo(f"No runs stored yet ({store.path}).")
        return
    console, terminal = viewer.console_for_stdout()
    viewer.render_runs(console, runs, terminal, counts, not_judged.get)
    for rid, lines in waiting.items():  # batch mode: what a run waits on (store/batches.py)
        typer.echo(f"{rid} waits on {len(lines)} batch{'es' if len(lines) != 1 else ''}:")
        for line in lines:
            typer.echo(f"  {line}")


@app.command("show")
def show_cmd(
    run: str = typer.Argument(..., metavar="RUN", help=RUN_HELP),
    test_idx: Optional[int] = typer.Argument(None, metavar="TEST_IDX", help="One test: every column's prompt, "
                                             "output, assertions with reasons, grader replies and claims."),
    as_json: bool = typer.Option(False, "--json", help="Print the stored rows as JSON."),
    db: Optional[str] = typer.Option(None, "--db", metavar="DB", help=DB_HELP),
) -> None:
    """Show one run (config, options, column metrics) or one test of it in full."""
    from factcli.report import show as detail

    with _store(db) as store:
        row = store.resolve(run)
        if test_idx is None:
            detail.show_run(store, row, as_json)
            if not as_json:
                for rid, lines in _waiting(store, [row["id"]], every=True).items():
                    typer.echo(f"Batches ({len(lines)}):")
                    for line in lines:
                        typer.echo(f"  {line}")
        else:
            detail.show_test(store, row, test_idx, as_json)


def _waiting(store, run_ids: list, every: bool = False) -> dict:
    """Per run, one line per batch it waits on (every batch of it, `every`): status and counts."""
    from factcli.store.batches import unfinished, waiting_on

    out = {}
    for rid in run_ids:
        if every or unfinished(store, rid):
            lines = waiting_on(store, rid)
            if lines:
                out[rid] = lines
    return out


@app.command("cancel")
def cancel_cmd(
    run: str = typer.Argument(..., metavar="RUN", help=RUN_HELP),
    db: Optional[str] = typer.Option(None, "--db", metavar="DB", help=DB_HELP),
) -> None:
    """Cancel the vendor batches a --batch run waits on (its key from OPENAI_API_KEY / ANTHROPIC_API_KEY)."""
    import asyncio

    from factcli.run.calling.batches import cancel
    from factcli.store.batches import unfinished

    with _store(db) as store:
        row = store.resolve(run)
        batches = unfinished(store, row["id"])
    if not batches:
        typer.echo(f"Run {row['id']} waits on no batch.")
        return
    for line in asyncio.run(cancel(batches)):
        typer.echo(line)
    typer.echo(f"--resume {row['id']} collects what they answered and submits the rest again.")


@app.command("diff")
def diff_cmd(
    run_a: str = typer.Argument(..., metavar="RUN_A", help=RUN_HELP),
    run_b: str = typer.Argument(..., metavar="RUN_B", help=RUN_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the differences as JSON."),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="Exit 100 when the pass rate, "
                                            "the mean score or a named metric of a column dropped beyond noise."),
    allow_partial: bool = typer.Option(False, "--allow-partial", help="With --fail-on-regression: compare what "
                                       "was judged even when either side has rows not judged for a compared figure "
                                       "(otherwise exit 4, naming what is missing)."),
    force: bool = typer.Option(False, "--force", help="Compare runs that share no config, prompt, test or provider."),
    pair: List[str] = typer.Option([], "--pair", metavar="A=B", help="Compare column A of RUN_A with column B of "
                                   "RUN_B (indices from 0), and only the columns paired so. Repeatable."),
    db: Optional[str] = typer.Option(None, "--db", metavar="DB", help=DB_HELP),
) -> None:
    """Compare two runs: rows that flipped between PASS, FAIL and ERROR, and metric deltas per column.

    Rows are matched by test description and vars (not position), repeat and column. Runs that share
    nothing (no config file, prompt, test or provider) are compared only with --force or --pair. Either
    side may be an exported results JSON (`-o results.json`, a release's artifact in CI) instead of a
    stored run."""
    from factcli.report.diff import diff_runs, parse_pairs
    from factcli.report.results_json import is_results_file

    files = [ref for ref in (run_a, run_b) if is_results_file(ref)]
    if not files:
        with _store(db) as store:
            pairs = parse_pairs(pair)
            a, b = store.resolve(run_a), store.resolve(run_b)
            dropped, unjudged = diff_runs(store, a, b, as_json, force=force, pairs=pairs)
    else:
        from factcli.errors import FactcliError

        try:
            dropped, unjudged = _diff_with_files(run_a, run_b, db, as_json, force, parse_pairs(pair))
        except FactcliError as exc:  # a file that is no results JSON, runs that share nothing: one line, exit 1
            fail(str(exc), exc.exit_code)
    if not fail_on_regression or not (dropped or (unjudged and not allow_partial)):
        return
    from rich.markup import escape

    from factcli.report.summary import stderr_console
    from factcli.settings import env_float

    console = stderr_console()
    for line in dropped:  # a drop beyond noise over what was judged on both sides: worse, whatever is missing
        console.print(f"[bold red]Regression:[/] {escape(line)}", soft_wrap=True)
    if dropped:
        raise typer.Exit(int(env_float("FACTCLI_FAILED_TEST_EXIT_CODE", 100)))
    # never a pass on figures the judge did not give (contract §2): exit 4, what is missing said
    for line in unjudged:
        console.print(f"[yellow]Not judged:[/] {escape(line)}", soft_wrap=True)
    console.print("The comparison is incomplete: retry the errors of that run (factcli eval --retry-errors RUN), "
                  "or compare what was judged with --allow-partial.", markup=False, soft_wrap=True)
    raise typer.Exit(4)


def _diff_with_files(run_a: str, run_b: str, db: Optional[str], as_json: bool, force: bool, pairs) -> list[str]:
    """diff where a side is a results JSON: both sides in a store of their own, for this diff only."""
    import tempfile

    from factcli.report.diff import diff_runs
    from factcli.report.results_json import import_results, is_results_file
    from factcli.store.copy import copy_run
    from factcli.store.database import Store

    with tempfile.TemporaryDirectory(prefix="factcli-diff-") as tmp:
        with Store.open(Path(tmp) / "diff.db", create=True) as scratch:
            sides = []
            for ref in (run_a, run_b):
                if is_results_file(ref):
                    sides.append(import_results(ref, scratch))
                else:
                    with _store(db) as store:
                        sides.append(scratch.resolve(copy_run(store, scratch, ref)["id"]))
            return diff_runs(scratch, sides[0], sides[1], as_json, force=force, pairs=pairs)


@app.command("export")
def export_cmd(
    run: str = typer.Argument(..., metavar="RUN", help=RUN_HELP),
    output: List[Path] = typer.Option(..., "-o", "--output", metavar="FILE", help="File to write; format from the extension: "
                                      ".json, .jsonl, .yaml (.txt: YAML), .csv, .xml, .junit.xml, .html. Repeatable."),
    db: Optional[str] = typer.Option(None, "--db", metavar="DB", help=DB_HELP),
) -> None:
    """Write a stored run to files, in the formats `eval -o` writes."""
    from factcli.report.exports import FORMATS, write_export

    from factcli.report.writable import creation_problem

    for p in output:  # every file checked before the run is read or any file written
        if not p.name.lower().endswith(FORMATS):
            fail(f"-o {p}: unsupported output format (use {', '.join(FORMATS)})")
        if problem := creation_problem(p):
            fail(f"-o {p}: {problem}")
    with _store(db) as store:
        from factcli.run.recording.stored import load_run

        row = store.resolve(run)
        stored = load_run(store, row)
    from factcli.errors import FactcliError

    from factcli.report.summary import working

    for p in output:
        try:
            with working(f"Writing {p} ({stored.total_steps:,} rows)…"):
                write_export(stored, p)
        except FactcliError as exc:
            fail(str(exc), exc.exit_code)
        typer.echo(f"Wrote {p}")


@app.command("delete")
def delete_cmd(
    run: str = typer.Argument(..., metavar="RUN", help=RUN_HELP),
    db: Optional[str] = typer.Option(None, "--db", metavar="DB", help=DB_HELP),
) -> None:
    """Delete a stored run and its rows."""
    from factcli.store.database import shown_status

    with _store(db) as store:
        row = store.resolve(run)
        if shown_status(row) == "running":
            fail(f"run {row['id']} is still running (pid {row['pid']} on {row['host']})")
        n = store.delete_run(row["id"])
    typer.echo(f"Deleted run {row['id']} ({n} row{'s' if n != 1 else ''}).")


@app.command("copy")
def copy_cmd(
    runs: List[str] = typer.Argument(..., metavar="RUN...", help=RUN_HELP + " Several may be given."),
    to: str = typer.Option(..., "--to", metavar="DB", help="The store to copy into: a SQLite file (made if "
                           "missing) or a postgresql:// URL."),
    db: Optional[str] = typer.Option(None, "--db", metavar="DB", help="The store to copy from. " + DB_HELP),
) -> None:
    """Copy runs, with their rows and ratings, to another store (SQLite to PostgreSQL and back).

    Copying again updates what changed and never duplicates a row or a rating."""
    from factcli.errors import FactcliError
    from factcli.store.copy import copy_run, same_store
    from factcli.store.database import shown

    with _store(db) as src, _store(to, create=True) as dst:
        if same_store(src, dst):
            fail(f"--to {shown(to)} is the store the runs are in (--db names the one to copy from)")
        for ref in runs:
            try:
                done = copy_run(src, dst, ref)
            except FactcliError as exc:
                fail(str(exc), exc.exit_code)
            typer.echo(f"Copied run {done['id']}: {done['rows']:,} rows, {done['ratings']} new ratings → {dst.path}")
