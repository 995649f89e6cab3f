"""`factcli cache`: manage the caches (model responses and downloaded tests)."""

from __future__ import annotations

import typer

from factcli.cli.root import cache_app


@cache_app.command("clear")
def cache_clear() -> None:
    """Delete every cached response and downloaded test set."""
    from factcli.run.cache import DownloadCache, ResponseCache

    n = ResponseCache().clear()
    d = DownloadCache().clear()
    typer.echo(f"Cleared {n} cached responses and {d} downloads.")
