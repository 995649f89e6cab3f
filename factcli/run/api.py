"""The Python API's eval: `factcli.evaluate(config, **options)` and `await factcli.evaluate_async(...)`.

It runs the eval flow the CLI runs (run/flow.py: load, filter, beforeAll, plan, preflight, store,
execute, outputs) without the terminal: warnings become Python warnings, bad input raises the FactcliError the CLI would print,
and the run is returned as a `Run` (run/result.py). The config may be a path, several paths, a YAML
text or a dict (promptfoo's `evaluate(testSuite, options)`), and may hold Python functions as
providers, graders and assertions (`with_functions`). `evaluate` works in a plain script and inside
a running event loop (a notebook cell), where it runs the eval on a loop of its own in a worker
thread; everything that touches the run store happens on that one thread.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from factcli import settings
from factcli.errors import FactcliError, did_you_mean
from factcli.run import runner
from factcli.run.flow import run_sync  # noqa: F401  (evaluate's; testing/rows.py and run/check.py import it here)

_IGNORED = {"showProgressBar", "progressCallback", "eventSource"}  # promptfoo's, about its own console


class FactcliWarning(UserWarning):
    """What the CLI prints as `warning: ...` (an unknown config key, an undefined var)."""


def warn(message: str) -> None:
    warnings.warn(message, FactcliWarning, stacklevel=user_stacklevel())


def user_stacklevel() -> int:
    """The stacklevel of the user's own line that called into factcli (past factcli's frames and the
    event loop's), so that a warning points there and Python's once-per-line filter applies to it."""
    import asyncio
    import concurrent.futures
    import os
    import sys

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # factcli/, this file being factcli/run/
    skip = tuple(d + os.sep for d in (package, *(os.path.dirname(m.__file__) for m in (asyncio, concurrent.futures))))
    frame, level = sys._getframe(1), 1  # the caller's frame is stacklevel 1 of its warnings.warn
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(skip) and not name.startswith("<frozen"):
            return level
        frame, level = frame.f_back, level + 1
    return 1


# ---------------------------------------------------------------- options


def parse_options(options: dict | None, kwargs: dict):
    """Keywords (and promptfoo's options dict) -> the eval's options (run/options.EvalOptions: its fields
    whose Option names an `api` kind are the keywords, with promptfoo's spellings); a bad one is a
    FactcliError; None leaves an option unset."""
    from factcli.run.options import EvalOptions, RunOptions, api_keywords

    keywords = api_keywords()
    own, run = {}, {}
    for key, value in {**(options or {}), **kwargs}.items():
        if key in _IGNORED:
            continue
        if key not in keywords:
            raise FactcliError(f"evaluate(): unknown option '{key}'{did_you_mean(key, list(keywords))}")
        f, owner = keywords[key]
        if value is not None:
            checks = f.metadata["option"].value  # the option's type and range (run/options.Value), as for the config
            if checks is not None:
                try:
                    checks.check(value)
                except ValueError as exc:
                    raise FactcliError(f"evaluate({key}={value!r}): {exc}") from None
            (run if owner is RunOptions else own)[f.name] = check_keyword(f.name, f.metadata["option"].api, value)
    return EvalOptions(**own, run=RunOptions(**run))


def check_keyword(name: str, kind: str, value: Any) -> Any:
    """evaluate(name=value), `kind` being its Option's `api` (run/options.py): the value as the option
    holds it. Its type and range were checked by the Option's `value` (parse_options)."""
    if kind == "grader":
        return _grader_id(value)
    if kind in ("count", "amount", "flag", "text"):
        return value
    if kind == "mapping":
        return {str(k): v for k, v in value.items()}
    if kind == "store":  # a SQLite file, or a postgresql:// URL (which a Path would mangle)
        from factcli.store.database import is_url

        return value.strip() if is_url(value) else Path(value)
    if kind == "paths":
        return [Path(p) for p in ([value] if isinstance(value, (str, Path)) else value)]
    raise ValueError(f"run/options.py: {name}: no such api kind {kind!r}")


def _grader_id(value: Any) -> Any:
    """A grader may be a Python function too (promptfoo's provider contract)."""
    if callable(value):
        from factcli.scripting import callables

        return f"{callables.PREFIX}:{callables.register(value)}"
    return value


# ---------------------------------------------------------------- Python functions in a config


def with_functions(cfg: dict) -> dict:
    """A copy of a config dict in which every Python function is replaced by its name
    (scripting/callables.py): a provider or grader by `python-function:NAME`, an assertion by
    `{type: python-function, value: NAME}` (also `{type: python, value: fn}`, promptfoo's Node API
    `{type: javascript, value: fn}` spelled for Python). A function anywhere else is an error."""
    return _walk(cfg, "")


def _provider(value: Any, where: str) -> Any:
    if callable(value):
        name = _grader_id(value).split(":", 1)[1]
        return {"id": f"python-function:{name}", "label": name} if where.startswith(("providers", "targets")) \
            else f"python-function:{name}"
    if isinstance(value, dict) and callable(value.get("id")):
        name = _grader_id(value["id"]).split(":", 1)[1]
        return {"label": name, **value, "id": f"python-function:{name}"}
    return _walk(value, where)


def _assertion(value: Any, where: str) -> Any:
    if callable(value):
        return {"type": "python-function", "value": _grader_id(value).split(":", 1)[1]}
    if isinstance(value, dict) and callable(value.get("value")):
        from factcli.scoring.registry import TYPES

        typ = str(value.get("type") or "python")
        inverse = typ.startswith("not-")
        facts = TYPES.get(typ.removeprefix("not-"))
        if facts is None or not facts.user_code:  # a type that runs the user's code
            raise FactcliError(f"evaluate(): {where}.value: a Python function is an assertion of its own "
                               f"(type python or python-function), not the value of '{typ}'")
        rest = {k: _walk(v, f"{where}.{k}") for k, v in value.items() if k not in ("type", "value")}
        return {**rest, "type": ("not-" if inverse else "") + "python-function",
                "value": _grader_id(value["value"]).split(":", 1)[1]}
    return _walk(value, where)


def _walk(value: Any, where: str) -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            here = f"{where}.{k}" if where else str(k)
            if k in ("providers", "targets") and isinstance(v, list):
                out[k] = [_provider(p, f"{here}[{i}]") for i, p in enumerate(v)]
            elif k in ("providers", "targets", "provider"):
                out[k] = _provider(v, here)
            elif k == "assert" and isinstance(v, list):
                out[k] = [_assertion(a, f"{here}[{i}]") for i, a in enumerate(v)]
            else:
                out[k] = _walk(v, here)
        return out
    if isinstance(value, (list, tuple)):
        return [_walk(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if callable(value) and not isinstance(value, type):
        raise FactcliError(f"evaluate(): {where}: a Python function can be a provider, a grader or an "
                           "assertion, not this value")
    return value


# ---------------------------------------------------------------- the config


def load_suite(config: Any, options: runner.RunOptions):
    """A path, a list of paths, YAML text or a dict -> the Suite (as -c would load it)."""
    if isinstance(config, dict):
        from factcli.config.loader import build_suite

        with runner.downloads(options):
            return build_suite(with_functions(config), None, options.vars)
    if isinstance(config, str) and ("\n" in config or not _is_file(config)):
        parsed = _yaml_text(config)
        if parsed is not None:
            from factcli.config.loader import build_suite

            with runner.downloads(options):
                return build_suite(with_functions(parsed), None, options.vars)
    if isinstance(config, (str, Path)):
        return runner.load([config], options)
    if isinstance(config, (list, tuple)) and config and all(isinstance(p, (str, Path)) for p in config):
        return runner.load(list(config), options)
    raise FactcliError(f"evaluate(): the config must be a path, a list of paths, YAML text or a dict, "
                       f"got {type(config).__name__}")


def _is_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except OSError:  # a name too long to be a path
        return False


def _yaml_text(text: str) -> dict | None:
    """Text of several lines is YAML and must be a mapping; one line is YAML when it reads as a
    mapping (`{prompts: [...], ...}`), else a path. Parsed exactly as a config file is."""
    several = "\n" in text
    if not several and ":" not in text:
        return None
    from factcli.errors import ConfigError
    from factcli.sources import parse_yaml

    try:
        data = parse_yaml(text, "<config>")
    except ConfigError:
        if not several:
            return None
        raise
    if isinstance(data, dict):
        return data
    if several:
        raise FactcliError(f"<config>: the config must be a mapping of keys, got {type(data).__name__}")
    return None


# ---------------------------------------------------------------- prepare and execute


class _PythonUI:
    """The flow in Python: warnings are FactcliWarnings, options are named as keywords, and filters
    that leave no test make an empty run (code may well ask for none), not an error."""

    refuse_empty_filters = False

    def option(self, name: str) -> str:
        return name

    def warn(self, message: str) -> None:
        warn(message)

    def note(self, message: str) -> None:
        pass  # the CLI's lines about what it does (re-loading a config); code gets the warnings alone

    def loaded(self, suite) -> None:
        for message in suite.warnings:
            warn(message)

    def working(self, message: str):
        import contextlib

        return contextlib.nullcontext()

    def progress(self, run):
        return None, warn, lambda: None

    def wrote(self, path: Path) -> None:
        pass


class Evaluation:
    """A loaded and checked run, ready to execute (the pytest plugin names its items after its steps
    before any of them runs); executing stores it. Both are the eval flow's (run/flow.py)."""

    def __init__(self, config: Any, options):
        """`options`: run/options.EvalOptions, as parse_options makes them."""
        import dataclasses

        from factcli.run.flow import Flow

        self.options = dataclasses.replace(options, config=config, keep_rows=True)
        self.flow = Flow(self.options, _PythonUI(), load_config=load_suite)
        before = settings.environ_snapshot()
        try:
            self.run = self.flow.prepare()
        except FactcliError as exc:
            for problem in getattr(exc, "problems", ()):  # shown under the message in a traceback
                exc.add_note(f"  - {problem}")
            raise
        finally:  # the config's env: (and env files): this run's, set again while it executes (settings.py)
            self.env = settings.environ_changes(before)
            settings.restore_environ(before)

    @property
    def steps(self):
        """The run's steps (run/planning/steps.Steps): iterate them for the rows it will run."""
        return self.run.steps

    def keep_only(self, keys: set[tuple[int, int, int]]) -> None:
        """Run only these (test, column, repeat) rows (the pytest items left after -k)."""
        self.run.steps.keep_only(keys)
        self.run.total_steps = len(self.run.steps)

    async def execute(self):
        """Execute, store each row as it finishes and the run at the end, write the outputs."""
        from factcli.run.result import Run

        before = settings.environ_snapshot()
        settings.apply_environ(self.env)
        try:
            await self.flow.execute()
            run = self.flow.run
            if run.status == runner.STATUS_ABORTED:
                warn(f"the run stopped: {run.abort_reason}")
            elif run.status == runner.STATUS_INTERRUPTED and run.abort_reason:
                warn(f"the run stopped: {run.abort_reason}; finished rows were kept")
            self.flow.write_outputs()
        finally:  # os.environ exactly as the caller had it: the next run never sees this one's env
            settings.restore_environ(before)
        return Run(run, stored=self.flow.stored)


async def evaluate_async(config: Any, options: dict | None = None, **kwargs):
    """`await factcli.evaluate_async(config, **options)`: evaluate() for code already in an event loop."""
    return await Evaluation(config, parse_options(options, kwargs)).execute()


def evaluate(config: Any, options: dict | None = None, **kwargs):
    """Run an eval and return its Run; see docs/python-api.md."""
    api_options = parse_options(options, kwargs)
    return run_sync(lambda: Evaluation(config, api_options).execute())
