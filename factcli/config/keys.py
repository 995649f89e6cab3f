"""Every config key factcli reads, at every level, with what its value is (its `Kind`): the one
declaration the loader's unknown-key checks take their known keys from (loader.TOP_KEYS,
testcases.TEST_KEYS, providers.PROVIDER_KEYS, ...), and the walk of a stored config a resumed run must
trust (config/stored_trust.py) follows. A key the loader reads that is not here is a failing test
(tests/test_stored_trust.py, the table test): a new key that can hold code, name a file, receive a
credential or a path to write cannot be missed by the trust check.

A level is a mapping of key -> Key. A key's value is walked by its kind; `level` names the level of
its value's keys when it is a mapping (or of each item / each value, by `shape`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(str, Enum):
    DATA = "data"  # text, numbers, templates (a template may read env vars: the walk finds those)
    CODE = "code"  # inline code, or a `file://` file of code (the loader's rule: sources.is_file_ref)
    READ = "file or URL to read"  # data, or a `file://` / URL reference read at load (a script file: code)
    PROVIDER = "provider"  # a provider id: code when the registry's class runs the user's code, else a model
    ENDPOINT = "endpoint"  # a URL that receives the provider's credential
    WRITE = "path to write"
    SECRET = "secret"  # never stored (store/redact), never listed
    ENV = "env var"  # names env vars: a mapping of them (an `env:` block) sets them, a name (`apiKeyEnvar`) reads one


VALUE, LIST, MAP = "value", "list", "map"  # Key.shape: the value itself, each item of a list, each value of a map


@dataclass(frozen=True)
class Key:
    kind: Kind = Kind.DATA
    level: str | None = None  # the keys of a mapping value (or item), by level name
    shape: str = VALUE
    # for an assertion's value: code only when its assertion's type is a script (python, javascript)
    script_value: bool = False
    file: bool = False  # always a file's path, written with or without file:// (not text that may name one)
    more_config: bool = False  # a file or URL it names holds more config (tests, providers): code, too


D = Key()
_TEST_OR_FILE = Key(Kind.READ, "test", more_config=True)

LEVELS: dict[str, dict[str, Key]] = {
    "top": {
        "description": D, "prompts": Key(Kind.READ, "prompt", LIST),
        "providers": Key(Kind.PROVIDER, "provider", LIST, more_config=True),
        "targets": Key(Kind.PROVIDER, "provider", LIST, more_config=True),
        "tests": Key(Kind.READ, "test", LIST, more_config=True), "defaultTest": _TEST_OR_FILE,
        "scenarios": Key(Kind.READ, "scenario", LIST, more_config=True),
        "evaluateOptions": Key(Kind.DATA, "evaluateOptions"),
        "derivedMetrics": Key(Kind.DATA, "derivedMetric", LIST),
        "assertionTemplates": Key(Kind.DATA, "assert", MAP), "env": Key(Kind.ENV, shape=MAP),
        "outputPath": Key(Kind.WRITE, shape=LIST), "metadata": D, "tags": D, "sharing": D,
        "nunjucksFilters": Key(Kind.CODE, shape=MAP, file=True), "extensions": Key(Kind.CODE, shape=LIST, file=True),
        "commandLineOptions": Key(Kind.DATA, "commandLineOptions"), "gates": Key(Kind.DATA, "gate", LIST),
    },
    "evaluateOptions": {k: D for k in ("maxConcurrency", "repeat", "delay", "showProgressBar", "cache", "timeoutMs",
                                       "maxEvalTimeMs", "generateSuggestions", "maxCost", "breakerFailures",
                                       "breakerSeconds", "batch", "batchRetry")},
    "prompt": {"id": Key(Kind.READ), "raw": D, "label": D, "config": D, "messages": D},
    "provider": {
        "id": Key(Kind.PROVIDER), "label": D, "config": Key(Kind.DATA, "provider.config"), "prompts": D, "delay": D,
        "transform": Key(Kind.CODE), "env": Key(Kind.ENV, shape=MAP),
    },
    # the keys factcli reads itself (request parameters, providers/litellm_provider.PASSTHROUGH, are data
    # sent as they are); a script provider gets its whole config (it is code, listed as such)
    "provider.config": {
        "apiBaseUrl": Key(Kind.ENDPOINT), "apiHost": Key(Kind.ENDPOINT), "api_base": Key(Kind.ENDPOINT),
        "apiKey": Key(Kind.SECRET), "api_key": Key(Kind.SECRET), "apiKeyEnvar": Key(Kind.ENV),
        "headers": Key(Kind.SECRET), "extra_headers": Key(Kind.SECRET),
        "apiVersion": D, "organization": D, "timeout": D, "maxConcurrency": D, "rpm": D, "tpm": D, "models": D,
        "max_retries": D, "base_model": D, "cost": D, "inputCost": D, "outputCost": D, "reasoning": D,
        "reasoningBudget": D, "cacheReadCost": D, "cacheWriteCost": D, "batchInputCost": D, "batchOutputCost": D,
        "cache": D,  # cache: false, no prompt-cache marks (providers/prompt_cache)
        "batch": D,  # batch: true|false, the provider's calls through its batch API
        "grammar": D, "knowledge": Key(Kind.READ, file=True),  # a knowledge search backend's file (providers/search)
    },
    "test": {
        "description": D, "vars": Key(Kind.READ, shape=MAP), "assert": Key(Kind.DATA, "assert", LIST),
        "options": Key(Kind.DATA, "test.options"), "threshold": D, "metadata": D, "providerOutput": D,
        "assertScoringFunction": Key(Kind.CODE, file=True), "critical": D,
    },
    "test.options": {
        "provider": Key(Kind.PROVIDER, "provider"), "rubricPrompt": Key(Kind.READ), "factuality": D, "prefix": D,
        "suffix": D, "transform": Key(Kind.CODE), "postprocess": Key(Kind.CODE), "disableDefaultAsserts": D,
        "disableVarExpansion": D, "runSerially": D, "storeOutputAs": D, "transformVars": Key(Kind.CODE),
        "disableConversationVar": D,
    },
    "assert": {
        "type": D, "value": Key(Kind.READ, script_value=True), "threshold": D, "weight": D,
        "provider": Key(Kind.PROVIDER, "provider"), "rubricPrompt": Key(Kind.READ), "metric": D,
        "transform": Key(Kind.CODE), "contextTransform": Key(Kind.CODE),
        "config": Key(Kind.DATA, "method.config"),
        "assert": Key(Kind.DATA, "assert", LIST), "$ref": D,
    },
    # a claim-level method's settings (an assertion's `config`): methods/settings.MethodSettings declares
    # their names and checks their values; these are the ones that are more than data
    "method.config": {
        "search": Key(Kind.DATA, "search"), "knowledge": Key(Kind.READ, file=True),
        "calibration": Key(Kind.READ, file=True),
        "embeddingProvider": Key(Kind.PROVIDER, "provider"), "models": Key(Kind.PROVIDER, shape=LIST),
        "decomposer": Key(Kind.PROVIDER, "provider"),
        "template": Key(Kind.READ), "templates": Key(Kind.READ, shape=MAP),
    },
    # a method's web or local search backend (providers/search)
    "search": {
        "provider": D, "apiBaseUrl": Key(Kind.ENDPOINT), "apiKey": Key(Kind.SECRET), "apiKeyEnvar": Key(Kind.ENV),
        "results": D, "costPerSearch": D, "cx": D, "gl": D, "lr": D, "search_depth": D,
        "knowledge": Key(Kind.READ, file=True), "passage_words": D,
    },
    "scenario": {"description": D, "config": Key(Kind.DATA, "test", LIST),
                 "tests": Key(Kind.READ, "test", LIST, more_config=True)},
    "testGenerator": {"path": Key(Kind.CODE, file=True), "config": D},  # a tests: item {path: file://gen.py:fn}
    "derivedMetric": {"name": D, "value": Key(Kind.CODE, script_value=True)},  # JavaScript, or a formula (data)
    "gate": {"metric": D, "min": D, "max": D, "bound": D, "min_judged": D},
    # promptfoo's options factcli takes (config/cli_options.HONOURED converts them)
    "commandLineOptions": {
        "maxConcurrency": D, "repeat": D, "delay": D, "cache": D, "table": D, "progressBar": D, "write": D,
        "grader": Key(Kind.PROVIDER), "description": D, "filterPattern": D, "filterFirstN": D, "filterSample": D,
        "filterFailing": D, "var": Key(Kind.READ, shape=MAP), "envPath": Key(Kind.READ, shape=LIST, file=True),
        "output": Key(Kind.WRITE, shape=LIST), "providers": Key(Kind.PROVIDER, shape=LIST, more_config=True),
    },
}


def names(level: str) -> frozenset[str]:
    """The keys of `level` (what its unknown-key check knows)."""
    return frozenset(LEVELS[level])


def every_key() -> frozenset[str]:
    return frozenset(k for keys in LEVELS.values() for k in keys)
