"""`factcli cache`: manage the caches (model responses and downloaded tests)."""

# No `from __future__ import annotations`: typer reads the commands' parameter types as each starts, and
# strings it would compile and evaluate first (as in eval_cmd.py).

import typer

from factcli.cli.root import cache_app


@cache_app.command("clear")
def cache_clear() -> None:
    """Delete every cached response and downloaded test set."""
    from factcli.run.calling.cache import DownloadCache, ResponseCache

    n = ResponseCache().clear()
    d = DownloadCache().clear()
    typer.echo(f"Cleared {n} cached responses and {d} downloads.")
