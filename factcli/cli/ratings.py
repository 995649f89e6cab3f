"""`factcli ratings list|export` (registered on factcli.cli.root.app): people's ratings of a stored run,
given in `factcli view --web`. The work is in factcli.report.ratings, imported inside the commands."""

# No `from __future__ import annotations`: typer reads the commands' parameter types as each starts, and
# strings it would compile and evaluate first (as in eval_cmd.py).

from pathlib import Path
from typing import Optional

import typer

from factcli.cli.root import app, fail
from factcli.cli.runs import DB_HELP, RUN_HELP, _store

ratings_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                          help="People's ratings of a run's rows (given in `factcli view --web`).")
app.add_typer(ratings_app, name="ratings")


@ratings_app.command("list")
def list_cmd(
    run: str = typer.Argument("latest", metavar="RUN", help=RUN_HELP),
    retracted: bool = typer.Option(False, "--retracted", help="Also the ratings taken back (marked)."),
    db: Optional[str] = typer.Option(None, "--db", metavar="DB", help=DB_HELP),
) -> None:
    """One line per rating: its id, the row, pass/fail, rater, assertion, comment and when."""
    from factcli.report.ratings import render_list
    from factcli.report.view import console_for_stdout

    with _store(db) as store:
        run_id = store.resolve(run)["id"]
        console, _ = console_for_stdout()
        render_list(console, store, run_id, include_retracted=retracted)


@ratings_app.command("export")
def export_cmd(
    run: str = typer.Argument("latest", metavar="RUN", help=RUN_HELP),
    output: Path = typer.Option(..., "-o", "--output", metavar="FILE", help="The labels file: .jsonl or .csv, "
                                "the formats `factcli calibrate` reads."),
    db: Optional[str] = typer.Option(None, "--db", metavar="DB", help=DB_HELP),
) -> None:
    """Write the rated rows as labeled items for `factcli calibrate`: one per row with a row-level
    rating in force (the latest), with its output, its rendered prompt as `question`, `reference` and
    `context` from the test's vars, the other vars as extra fields, and `label` pass or fail."""
    from factcli.errors import FactcliError
    from factcli.report.ratings import check_labels_file, label_items, write_labels

    try:
        check_labels_file(output)
    except FactcliError as exc:
        fail(str(exc), exc.exit_code)
    with _store(db) as store:
        run_id = store.resolve(run)["id"]
        items = label_items(store, run_id)
    if not items:
        fail(f"run {run_id} has no row-level rating to export (rate rows in `factcli view --web`)")
    try:
        write_labels(items, output)
    except FactcliError as exc:
        fail(str(exc), exc.exit_code)
    except OSError as exc:
        fail(f"{output}: cannot write: {exc.strerror or exc}")
    typer.echo(f"Wrote {len(items)} labeled items to {output}")
