"""factcli: promptfoo-compatible LLM evaluations with factuality scoring, from Python.

`import factcli` stays cheap: the machinery is imported on the first call of evaluate() or check().
"""

from factcli.errors import ConfigError, FactcliError
from factcli.settings import VERSION as __version__

__all__ = ["ConfigError", "FactcliError", "__version__", "check", "evaluate", "evaluate_async"]


def evaluate(config, options=None, **kwargs):
    """Run an eval and return the Run (rows, column summaries, to_promptfoo(), to_pandas()).

    `config`: a path, a list of paths (merged as several -c), YAML text or a dict whose providers,
    graders and assertions may be Python functions. Keywords are the `factcli eval` options
    (max_concurrency, repeat, delay_ms, cache, grader, filter_pattern, filter_first_n, filter_sample,
    description, vars, max_cost) plus store (default True), db and outputs. Works inside a running
    event loop (a notebook). Bad input raises FactcliError with the message the CLI prints.
    """
    from factcli.run.api import evaluate as _evaluate

    return _evaluate(config, options, **kwargs)


async def evaluate_async(config, options=None, **kwargs):
    """`await factcli.evaluate_async(config, **options)`: evaluate() on the caller's event loop."""
    from factcli.run.api import evaluate_async as _evaluate_async

    return await _evaluate_async(config, options, **kwargs)


def check(output, assertions, vars=None, grader=None, prompt=None, **options):
    """Grade one output with any assertion (dict, list of dicts, or a Python function) and return the
    CheckResult (passed, score, reason, components, failing claims); synchronous, also inside a
    running event loop."""
    from factcli.run.check import check as _check

    return _check(output, assertions, vars=vars, grader=grader, prompt=prompt, **options)
