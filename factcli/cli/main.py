"""The entry point: every command group registered on the app, and the one place a bug becomes a
one-line error instead of a traceback."""

from __future__ import annotations

import os
import sys

from factcli.cli import cache, calibrate, eval_cmd, init_cmd, ratings, runs  # noqa: F401  (each registers its commands on app)
from factcli.cli.app import app


def main() -> None:
    try:
        app()
    except SystemExit:
        raise
    except Exception as exc:  # a bug: one line for the user, the traceback with FACTCLI_DEBUG=1
        if os.environ.get("FACTCLI_DEBUG", "") not in ("", "0"):
            raise
        print(f"error: internal error: {type(exc).__name__}: {exc} (set FACTCLI_DEBUG=1 for the traceback)",
              file=sys.stderr)
        sys.exit(1)
