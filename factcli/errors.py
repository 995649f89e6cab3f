"""Errors a user sees as one line. Everything else is a bug and shows a traceback only with FACTCLI_DEBUG=1."""

from __future__ import annotations


class FactcliError(Exception):
    """A problem the user can fix; printed as one line, exit code 1 (and, below it, the `excerpt`
    of the input it points at, when there is one: the lines around a YAML syntax error)."""

    exit_code = 1
    excerpt: list[str] = []


class ConfigError(FactcliError):
    """Bad input in a config, tests or outputs file: names the file and the key path."""

    def __init__(self, message: str, file: str | None = None, path: str | None = None):
        self.file = file
        self.path = path
        self.detail = message
        where = ": ".join(p for p in (file, path) if p)
        super().__init__(f"{where}: {message}" if where else message)


class ConfigProblems(ConfigError):
    """Every problem found before any call, reported together: one line each in `problems` (a single
    problem is the one line of the message, as every error is)."""

    def __init__(self, problems: list[str]):
        problems = _grouped(problems)
        if len(problems) == 1:
            self.problems = []
            message = f"{problems[0]} (found before any call; nothing was sent)"
        else:  # a mistake repeated on every row of a big test file is not listed 10,000 times
            self.problems = problems if len(problems) <= SHOWN_PROBLEMS else (
                problems[:SHOWN_PROBLEMS] + [f"… and {len(problems) - SHOWN_PROBLEMS:,} more"])
            message = f"{len(problems):,} problems found before any call (nothing was sent):"
        super().__init__(message)


SHOWN_PROBLEMS = 30  # lines ConfigProblems lists at most


def _grouped(problems: list[str]) -> list[str]:
    """One line per problem, the same problem in many tests once (`… (and 2 more like it)`), as the
    unknown-key warnings are grouped."""
    import re

    groups: dict[str, list[str]] = {}
    for line in problems:
        groups.setdefault(re.sub(r"\[\d+\]", "[]", line), []).append(line)
    return [lines[0] if len(set(lines)) == 1 else f"{lines[0]} (and {len(set(lines)) - 1} more like it)"
            for lines in groups.values()]


class StoreUnavailable(FactcliError):
    """The store cannot be reached (a server down or out of reach): the web view's 503."""


class AbortRun(FactcliError):
    """A fatal provider error (401/403 and alike): the run stops, what finished is kept."""

    exit_code = 3


def did_you_mean(word: str, choices) -> str:
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


# ---------------------------------------------------------------- factcli's own bugs inside a row
# A handler, a method or the executor that raises one of these (and no error class of its own) has a
# bug, not bad input: Python raises them for code that is wrong (a missing key, a None where an object
# was meant, a bad slice). User code (python and javascript assertions, transforms) reaches the
# executor wrapped in its own error classes (scripting/), so these are factcli's.
BUG_TYPES = (AttributeError, AssertionError, IndexError, KeyError, NameError, RecursionError, TypeError,
             ZeroDivisionError)
BUG_PREFIX = "factcli bug: "  # how a row's error says it (stored, counted apart: scoring/metrics.bugs)


def is_bug(exc: BaseException) -> bool:
    return isinstance(exc, BUG_TYPES) and not isinstance(exc, FactcliError)


def bug_message(exc: BaseException, where: str) -> str:
    """A bug's one line on its row: the exception's type and text, where it happened, and how to see
    its traceback (FACTCLI_DEBUG=1, which `factcli --debug` sets)."""
    text = " ".join(str(exc).split())
    return (f"{BUG_PREFIX}{type(exc).__name__}{': ' + text if text else ''} in {where} (this row stopped; "
            "run again with factcli --debug, or FACTCLI_DEBUG=1, for the traceback, and please report it)")


def is_bug_message(text) -> bool:
    return isinstance(text, str) and text.startswith(BUG_PREFIX)
