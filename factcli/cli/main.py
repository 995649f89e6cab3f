"""The entry point: the command a command line names registered on the app (or every command, for a
command line that names none), and the one place a bug becomes a one-line error instead of a traceback."""

from __future__ import annotations

import copy
import gc
import importlib
import os
import sys

from factcli.cli.root import app

# The module that registers each command and command group on `app`: `factcli NAME` imports NAME's
# alone (issue 30: importing the others would slow every start). tests/test_startup.py holds it to what the
# modules register.
COMMAND_MODULES = {
    "cache": "cache", "calibrate": "calibrate", "eval": "eval_cmd", "init": "init_cmd", "ratings": "ratings",
    "view": "runs", "list": "runs", "show": "runs", "diff": "runs", "export": "runs", "delete": "runs",
    "copy": "runs", "cancel": "runs",
}
# Imported in this order, they register their commands in the order `factcli --help` lists them.
_ORDER = ("cache", "calibrate", "eval_cmd", "init_cmd", "ratings", "runs")


def whole_app():
    """The app with every command registered on it (`factcli.cli.app`)."""
    for module in _ORDER:
        importlib.import_module(f"factcli.cli.{module}")
    return app


def main() -> None:
    try:
        args = sys.argv[1:]
        module = COMMAND_MODULES.get(args[0]) if args else None
        if module is None:
            whole_app()
        else:
            importlib.import_module(f"factcli.cli.{module}")
        app_for(args)()
    except SystemExit:
        raise
    except Exception as exc:  # a bug: one line for the user, the traceback with FACTCLI_DEBUG=1
        if os.environ.get("FACTCLI_DEBUG", "") not in ("", "0"):
            raise
        print(f"error: internal error: {type(exc).__name__}: {exc} (set FACTCLI_DEBUG=1 for the traceback)",
              file=sys.stderr)
        sys.exit(1)
    finally:
        # The process is about to end: what is left (a held suite of thousands of tests is tens of
        # thousands of objects in cycles) would be walked by the collections of the interpreter's
        # shutdown, for nothing. Frozen, it is left to the process's exit; what refcounting frees (open
        # files, the store's connection) is still freed and flushed as before.
        gc.freeze()


def app_for(args: list[str]):
    """The app as a command line `args` runs it: when its first word names a command (or a command
    group), the app holding that one alone. Typer makes a click command of every registered command,
    options and all, at each start (a noticeable part of a one-row eval: issue 30), and a command
    line runs one; what it parses, prints and exits with is that command's either way. Anything else
    (no word, an option first, a mistyped name that the group's error would suggest a fix for) gets
    the whole app."""
    name = args[0] if args else ""
    commands = [c for c in app.registered_commands if c.name == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    lean = copy.copy(app)
    lean.registered_commands, lean.registered_groups = commands, groups
    return lean
