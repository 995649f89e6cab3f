"""The typer app that every command module registers on, and the one printer of errors.

Argument parsing and exit codes only; the work lives in the stages below. Heavy modules are
imported inside the commands so that `factcli --help` stays fast.
"""

# No `from __future__ import annotations`: typer reads the commands' parameter types as each starts, and
# strings it would compile and evaluate first (as in eval_cmd.py).

import gc
from contextlib import contextmanager

import typer

from factcli.settings import VERSION

app = typer.Typer(
    add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
    help="Run promptfoo-compatible LLM evaluations described in YAML, with factuality scoring.",
)
cache_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Manage the response cache.")
app.add_typer(cache_app, name="cache")
DB_HELP = ("The run store: a SQLite file or a postgresql:// URL (default: FACTCLI_DB, else "
           "FACTCLI_HOME/factcli.db).")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"factcli {VERSION}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Print the traceback of a factcli bug (an internal "
                               "error, or a row a bug stopped) as it happens; the same as FACTCLI_DEBUG=1."),
) -> None:
    """factcli: measure whether LLM outputs are factually right."""
    if debug:  # the one switch every layer reads (settings.debug); this process is the command's own
        import os

        os.environ["FACTCLI_DEBUG"] = "1"


def fail(message: str, code: int = 1, problems: tuple | list = (), excerpt: tuple | list = ()) -> None:
    """Print an error (and, for a check that found several, one line per problem; for a syntax
    error, the lines it points at) and exit. A database URL's password never reaches the terminal
    (shown as ***), nor any other secret (store/redact.scrub_text: by value and by shape)."""
    from factcli.store.database import redact as redact_url
    from factcli.store.redact import scrub_text

    def redact(text) -> str:
        return scrub_text(redact_url(text))

    typer.echo(f"error: {one_line(redact(message))}", err=True)
    for problem in problems:
        typer.echo(f"  - {one_line(redact(problem))}", err=True)
    for line in excerpt:
        typer.echo(f"  {one_line(redact(line))}", err=True)
    raise typer.Exit(code)


@contextmanager
def start_up():
    """A command's start (its imports, the config, the plan) makes objects that live as long as the
    process: the cyclic collector's passes over them find nothing, and cost a one-row eval CPU (issue
    30). It is paused meanwhile and on again (if it was) before the command's own work, the rows, with
    what the start made frozen (gc.freeze), as rows_running() freezes it when the rows start: turned on
    with them still young, it would walk them all at once."""
    on = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if on:
            gc.enable()


GEN0 = 20_000  # allocations between two collections of the youngest generation while rows run (CPython: 700)


@contextmanager
def rows_running():
    """While a command's rows run, the cyclic garbage collector leaves alone what existed before (the
    suite, its tests, the plan: gc.freeze) and runs its youngest generation less often: a finished
    row is freed by reference counting, and collections walking the tests of a large suite over and
    over cost a stored echo run much of its CPU (benchmarks/README.md, issue 30). Both are undone
    after. Here, in the command line's process, and not in the library: `evaluate()` and pytest
    users keep their collector as they set it."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(GEN0, threshold[0]), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def one_line(message: str, limit: int = 1000) -> str:
    """An error is one readable line even when it quotes a value from the input: control
    characters (newlines included) are escaped and a huge value is cut in the middle."""
    if not message.isprintable():
        message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    if len(message) > limit:
        message = f"{message[:limit * 2 // 3]} [... {len(message) - limit} characters ...] {message[-limit // 3:]}"
    return message
