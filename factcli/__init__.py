"""factcli: promptfoo-compatible LLM evaluations with factuality scoring, from Python."""

from factcli.settings import VERSION as __version__

__all__ = ["__version__", "evaluate"]


def evaluate(config, **options):
    """Run an eval from a config path, a list of paths or a config dict; return an EvalRun.

    Imported lazily so that `import factcli` (and `factcli --help`) stays cheap.
    """
    from factcli.run.runner import evaluate as _evaluate

    return _evaluate(config, **options)
