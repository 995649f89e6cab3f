"""`factcli cache`: manage the response cache."""

from __future__ import annotations

import typer

from factcli.cli.app import cache_app


@cache_app.command("clear")
def cache_clear() -> None:
    """Delete every cached response."""
    from factcli.run.cache import ResponseCache

    n = ResponseCache().clear()
    typer.echo(f"Cleared {n} cached responses.")
