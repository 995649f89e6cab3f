"""The command line: `app` holds the commands (one module per command group), `main` runs it."""

from factcli.cli.main import app, main

__all__ = ["app", "main"]
