"""A config's `commandLineOptions:` (promptfoo's): defaults for `factcli eval`'s own flags, below the
command line. Each option factcli has sets its option when the command line does not; an option factcli
lacks is one warning naming it; a value of the wrong type is a config error, as promptfoo's schema
check makes it. The loader checks the key (`check`); the eval command takes the values (`values`)
into its options (run/options.EvalOptions.filled: the fields the command line left unset), where each
value is checked by its option's own type and range (run/options.Option.value: the one check that
evaluate()'s keywords go through too); here a value is only read as promptfoo reads it ("4" is 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from factcli.config.context import join, near_miss, unknown_key, unknown_keys_collected
from factcli.errors import ConfigError

KEY = "commandLineOptions"


def _number(value: Any) -> Any:
    """promptfoo coerces numbers given as text ("4", "2.5"); anything else is left for the option's check."""
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            return float(text)
        except ValueError:
            return value
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected text, got {value!r}")
    return value


def _texts(value: Any) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and v.strip() for v in items):
        raise ValueError(f"expected a list of text, got {value!r}")
    return items


def _mapping(value: Any) -> dict:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"expected a mapping of var names to values, got {value!r}")
    return {k: v if isinstance(v, str) else str(v) for k, v in value.items()}


def _same(value: Any) -> Any:
    return value


def _paths(value: list[str]) -> list[Path]:
    return [Path(p) for p in value]


# promptfoo's option -> (the field of factcli's eval options it sets (run/options.py), conversion, how
# the config's value becomes the field's; None: it leaves the field as it is)
# (the fields with a type and range of their own, run/options.Option.value, are read as they are:
# their check is the option's)
HONOURED: dict[str, tuple[str, Callable, Callable]] = {
    "maxConcurrency": ("max_concurrency", _number, _same),
    "repeat": ("repeat", _number, _same),
    "delay": ("delay_ms", _number, _same),
    "cache": ("cache", _same, lambda v: (None if v else False) if isinstance(v, bool) else v),
    "table": ("table", _same, _same),
    "progressBar": ("progress_bar", _same, _same),
    "write": ("store", _same, _same),
    "grader": ("grader", _text, _same),
    "description": ("description", _same, _same),
    "filterPattern": ("filter_pattern", _same, _same),
    "filterFirstN": ("filter_first_n", _number, _same),
    "filterSample": ("filter_sample", _number, _same),
    "filterFailing": ("filter_failing", _same, _same),
    "var": ("vars", _mapping, _same),
    "envPath": ("env_files", _texts, _paths),
    "output": ("outputs", _texts, _paths),
    "providers": ("providers", _texts, _same),
}

# promptfoo's other options: factcli has no such flag (or it makes no sense in a config), said once each
NOT_HONOURED = {
    "verbose": "set FACTCLI_DEBUG=1 for debug output",
    "share": "factcli never uploads results", "noShare": "factcli never uploads results",
    "watch": "factcli has no watch mode", "tableCellMaxLength": "factcli sizes the table to the terminal",
    "filterErrorsOnly": "use --retry-errors RUN", "filterFailingOnly": "use --filter-failing RUN",
    "filterMetadata": "factcli has no metadata filter", "filterPrompts": "factcli has no prompt filter",
    "filterProviders": "use -r/--providers", "filterTargets": "use -r/--providers",
    "filterRange": "use --filter-first-n or --filter-sample", "filterSampleSeed": "factcli's sample has no seed option",
    "tags": "factcli has no run tags", "generateSuggestions": "factcli does not suggest prompts",
    "suggestionsCount": "factcli does not suggest prompts",
    "promptPrefix": "set defaultTest.options.prefix", "promptSuffix": "set defaultTest.options.suffix",
    "retryErrors": "use --retry-errors RUN", "extension": "list the hooks under extensions:",
    "prompts": "list them under prompts:", "tests": "list them under tests:", "vars": "list them under tests:",
    "config": "a config cannot name configs", "assertions": "use --assertions on the command line",
    "modelOutputs": "use --model-outputs on the command line",
}


def check(value: Any, file: str) -> dict:
    """The config's options, converted: a wrong type or a near miss of an option's name is a ConfigError,
    an option factcli lacks one ignored-key warning (an error with --strict)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"expected a mapping of options (e.g. maxConcurrency: 2), got {type(value).__name__}",
                          file, KEY)
    out = {}
    for key, given in value.items():
        where = join(KEY, str(key))
        if key in NOT_HONOURED:
            unknown_key(file, where, f"not an option of factcli ({NOT_HONOURED[key]}; ignored)")
            continue
        if key not in HONOURED:
            close = near_miss(str(key), set(HONOURED) | set(NOT_HONOURED))
            if close:
                raise ConfigError(f"unknown option '{key}' (did you mean '{close}'?)", file, where)
            unknown_key(file, where, "not an option of promptfoo or factcli (ignored)")
            continue
        try:
            out[key] = HONOURED[key][1](given)
        except ValueError as exc:
            raise ConfigError(str(exc), file, where) from None
    return out


def values(configs: list[tuple[Path, dict]]) -> dict[str, Any]:
    """The configs' commandLineOptions (each config file as read), by the field of the eval options
    each sets (later files win, as promptfoo merges them); the eval command puts them under the
    command line's (run/options.EvalOptions.filled: a switch the command line turned on stays on,
    `var` entries merge under the command line's)."""
    merged: dict = {}
    written: dict = {}
    for path, cfg in configs:
        with unknown_keys_collected():  # (the loader tells them)
            options = check(cfg.get(KEY), str(path))
        if "envPath" in options:  # promptfoo resolves it against the config's folder
            options["envPath"] = [str(path.parent / p) for p in options["envPath"]]
        merged.update(options)
        written.update((key, (str(path), join(KEY, key))) for key in options)
    out = Given()
    for key, value in merged.items():
        name, _, to_field = HONOURED[key]
        value = to_field(value)
        if value is not None:
            out[name] = value
            out.where[name] = written[key]
    return out


class Given(dict):
    """The options a config gives, by field, and `where` each was written: (file, key path)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.where: dict[str, tuple[str, str]] = {}
