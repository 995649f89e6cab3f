"""The entry point: every command group registered on the app, and the one place a bug becomes a
one-line error instead of a traceback."""

from __future__ import annotations

import gc
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
    finally:
        # The process is about to end: what is left (a held suite of 10,000 tests is 30,000 objects in
        # cycles) would be walked by the collections of the interpreter's shutdown, ~85 ms after a
        # 10,000-row eval. Frozen, it is left to the process's exit; what refcounting frees (open
        # files, the store's connection) is still freed and flushed as before.
        gc.freeze()
