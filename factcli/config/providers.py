"""The providers of a config (and of a test or an assertion): ids, labels, config, per-provider prompts;
an id is checked against the provider registry when it is read."""

from __future__ import annotations

import sys
from typing import Any

from factcli import sources
from factcli.config import keys
from factcli.config.context import (Ctx, as_list, check_keys, expect, join, near_miss, number, read_label, record,
                                    unknown_key)
from factcli.errors import ConfigError
from factcli.types import ProviderSpec

PROVIDER_KEYS = keys.names("provider")
PROVIDER_UNSUPPORTED = {"inputs": "a provider's inputs serve promptfoo's red teaming, which factcli does not have"}


def parse_providers(value: Any, ctx: Ctx, key: str = "providers") -> list[ProviderSpec]:
    if value is None:
        raise ConfigError("no providers: add a 'providers:' list (e.g. - echo, or - openai:gpt-5-mini)",
                          ctx.file, key)
    if sources.is_file_ref(value):
        path, _ = sources.ref_path(value, ctx.base)
        value = sources.load_structured(path)
        ctx = Ctx(str(path), path.parent, ctx.templates)
    from factcli.providers.registry import validate_provider_id

    out = []
    for i, item in enumerate(as_list(value)):
        where = f"{key}[{i}]"
        if sources.is_file_ref(item) and item.endswith((".yaml", ".yml", ".json")):
            out.extend(parse_providers(item, ctx, where))
            continue
        try:
            spec = parse_provider(item, ctx, where)
            validate_provider_id(spec, ctx.file, where, ctx.base)
            _check_unused_config(spec, ctx, where + ".config")
        except ConfigError as exc:  # the other providers are still checked
            if not record(exc):
                raise
            out.append(ProviderSpec(id="echo", label=f"{where} (not loaded)"))  # holds its place; never called
            continue
        out.append(spec)
    expect(bool(out), "no providers", ctx.file, key)
    return out


def parse_provider(item: Any, ctx: Ctx, where: str) -> ProviderSpec:
    if isinstance(item, str):
        expect(bool(item.strip()), "empty provider id", ctx.file, where)
        return ProviderSpec(id=item.strip())
    expect(isinstance(item, dict), f"expected a provider id or mapping, got {type(item).__name__}", ctx.file, where)
    if "id" not in item and len(item) == 1:  # legacy form {provider-id: {config...}}
        (pid, opts), = item.items()
        opts = opts or {}
        expect(isinstance(opts, dict), "expected provider options", ctx.file, f"{where}.{pid}")
        item = {"id": pid, **opts}
    check_keys(item, PROVIDER_KEYS, ctx.file, where, PROVIDER_UNSUPPORTED)
    pid = item.get("id")
    expect(isinstance(pid, str) and pid.strip(), "a provider needs an 'id'", ctx.file, where + ".id")
    config = item.get("config") or {}
    expect(isinstance(config, dict), "expected a mapping", ctx.file, where + ".config")
    check_values(config, ctx.file, where + ".config")
    _check_credentials(config, ctx, where + ".config")
    if not _runs_user_code(pid.strip()):  # a script provider's config is its own: every key is passed to it
        _check_near_misses(config, ctx, where + ".config")
    prompts = item.get("prompts")
    if prompts is not None:
        prompts = [str(p) for p in as_list(prompts)]
    delay = item.get("delay") or 0
    from factcli.scripting.transforms import check_transform

    return ProviderSpec(
        id=pid.strip(), label=read_label(item.get("label"), ctx.file, where + ".label"), config=config,
        prompts=prompts,
        delay_ms=number(delay, ctx.file, where + ".delay"),
        transform=check_transform(item.get("transform"), ctx.file, where + ".transform", ctx.base),
    )


# The config keys factcli reads itself besides the request parameters (litellm_provider.PASSTHROUGH).
# A near miss of one of these is a typo (`temprature`), an error; any other key of an API model's
# config is sent nowhere and gets a warning (contract §4).
# (config/keys.py, level provider.config: prices by hand are providers/pricing.CONFIG_KEYS, read, never
# sent; reasoning and grammar a grader's, docs/judges.md)
KNOWN_CONFIG_KEYS = keys.names("provider.config")


def _runs_user_code(pid: str) -> bool:
    from factcli.providers.registry import provider_class

    return bool(getattr(provider_class(pid), "user_code", False))


def _check_near_misses(config: dict, ctx: Ctx, where: str) -> None:
    if not config:  # (nor the import: litellm's provider module is not needed by a run without one)
        return
    from factcli.providers.litellm_provider import PASSTHROUGH

    known = KNOWN_CONFIG_KEYS | PASSTHROUGH
    for key in config:
        if key in known or not isinstance(key, str):
            continue
        close = near_miss(key, known)
        if close:
            raise ConfigError(f"unknown parameter '{key}'; did you mean '{close}'?", ctx.file, f"{where}.{key}")


def _check_unused_config(spec: ProviderSpec, ctx: Ctx, where: str) -> None:
    """An API model sends only the parameters it knows (as promptfoo's OpenAI provider does): any other
    key of its config is one warning naming it and the provider. Script providers get their whole
    config, and echo has nothing to send, so theirs are left alone."""
    from factcli.providers.registry import create_provider

    if not _api_model(create_provider(spec, ctx.base)):
        return
    from factcli.providers.litellm_provider import PASSTHROUGH, RENAMED

    for key in spec.config:
        if key not in KNOWN_CONFIG_KEYS and key not in PASSTHROUGH and key not in RENAMED:
            unknown_key(ctx.file, join(where, key), f"'{key}' is not a parameter of {spec.id} (ignored)", key,
                        KNOWN_CONFIG_KEYS | PASSTHROUGH)


def _api_model(provider) -> bool:
    """Whether `provider` is litellm's or OpenAI's. Neither module is imported for it: an instance of
    their classes exists only once its module is (an echo or script run imports neither)."""
    for module, name in (("factcli.providers.litellm_provider", "LiteLLMProvider"),
                         ("factcli.providers.openai_provider", "OpenAIProvider")):
        if module in sys.modules and isinstance(provider, getattr(sys.modules[module], name)):
            return True
    return False


def request_params(options: dict, option_keys: set, unsupported: dict, ctx: Ctx, where: str) -> dict:
    """A test's `options` keys that are not test options are request parameters, as promptfoo merges
    its test options over the provider config (contract §4). Returns those the request body takes
    (the providers send them over their own config); a near miss of a parameter or of a test option
    is an error; any other key is one warning, since nothing would read it."""
    from factcli.providers.litellm_provider import PASSTHROUGH

    params = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise ConfigError(f"keys must be strings, got {key!r}", ctx.file, where)
        if key in option_keys:
            continue
        if not key.strip():
            raise ConfigError(f"unknown key '{key}'", ctx.file, join(where, key))
        if key in unsupported:
            raise ConfigError(f"'{key}' is not supported by factcli: {unsupported[key]}", ctx.file, join(where, key))
        if key in PASSTHROUGH:
            params[key] = value
            continue
        if key in KNOWN_CONFIG_KEYS:  # promptfoo too leaves the endpoint alone (apiBaseUrl did not redirect)
            unknown_key(ctx.file, join(where, key), f"'{key}' is a provider setting, not a request parameter: "
                        "set it in the provider's config (ignored here)")
            continue
        close = near_miss(key, option_keys | set(unsupported) | PASSTHROUGH | KNOWN_CONFIG_KEYS)
        if close:
            raise ConfigError(f"unknown key '{key}' (did you mean '{close}'?)", ctx.file, join(where, key))
        unknown_key(ctx.file, join(where, key), f"'{key}' is neither a test option nor a request parameter "
                    "(ignored)", key, option_keys | PASSTHROUGH)
    return params


def _check_credentials(config: dict, ctx: Ctx, where: str) -> None:
    """A key is one string; an endpoint carries no user name or password: the HTTP client refuses a URL's
    userinfo beside the Authorization header it sends (a crash, issue 48), and a password there would
    be sent to whoever the URL names."""
    for key in ("apiKey", "api_key"):
        value = config.get(key)
        expect(value is None or isinstance(value, str),
               f"expected the API key as a string, got {type(value).__name__}", ctx.file, f"{where}.{key}")
    for key in ("apiBaseUrl", "api_base", "apiHost"):
        value = config.get(key)
        if value is None:
            continue
        expect(isinstance(value, str), f"expected a URL, got {type(value).__name__}", ctx.file, f"{where}.{key}")
        from factcli.providers.base import has_userinfo

        if has_userinfo(value):
            raise ConfigError("the URL holds a user name or password before its host, which factcli does not "
                              "send: put the key in apiKey or apiKeyEnvar (sent as a Bearer token), or a header "
                              "under headers", ctx.file, f"{where}.{key}")


def check_values(config: dict, file: str | None, where: str) -> None:
    """The provider config values factcli reads itself, of a model or a grader (run/planning/graders):
    maxConcurrency, rpm and tpm (run/calling/limits.py) are factcli's, so a bad value is an error here, not a
    parameter the API rejects."""
    for key in ("maxConcurrency", "rpm", "tpm"):
        value = config.get(key)
        if value is None:
            continue
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
        if key == "maxConcurrency":
            ok = ok and float(value).is_integer()
        expect(ok, f"expected a positive {'whole ' if key == 'maxConcurrency' else ''}number, got {value!r}",
               file, f"{where}.{key}")
    # factcli's own switches and prices (providers/prompt_cache, run/calling/batches, providers/pricing): a
    # value they would read as something else is an error here, never a silent default
    for key in ("batch", "cache"):
        if key in config:
            expect(isinstance(config[key], bool), f"expected true or false, got {config[key]!r}", file,
                   f"{where}.{key}")
    for key in ("cacheReadCost", "cacheWriteCost", "batchInputCost", "batchOutputCost"):
        value = config.get(key)
        if value is not None:
            expect(isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0,
                   f"expected a price in USD per token (a number, 0 or more), got {value!r}", file,
                   f"{where}.{key}")
