"""The command line: `app` holds the commands (one module per command group, registering them on the
typer app of `root`), `main` runs it. `app` is made whole when first asked for: `factcli NAME`
imports the module of NAME alone (main.main)."""

from factcli.cli.main import main

__all__ = ["app", "main"]


def __getattr__(name: str):
    if name == "app":
        from factcli.cli.main import whole_app

        return whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
