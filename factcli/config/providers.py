"""The providers of a config (and of a test or an assertion): ids, labels, config, per-provider prompts;
an id is checked against the provider registry when it is read."""

from __future__ import annotations

from typing import Any

from factcli import sources
from factcli.config.context import Ctx, as_list, check_keys, expect, number
from factcli.errors import ConfigError
from factcli.types import ProviderSpec

PROVIDER_KEYS = {"id", "label", "config", "prompts", "delay", "transform", "env"}


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
        spec = parse_provider(item, ctx, where)
        validate_provider_id(spec, ctx.file, where, ctx.base)
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
    check_keys(item, PROVIDER_KEYS, ctx.file, where)
    pid = item.get("id")
    expect(isinstance(pid, str) and pid.strip(), "a provider needs an 'id'", ctx.file, where + ".id")
    config = item.get("config") or {}
    expect(isinstance(config, dict), "expected a mapping", ctx.file, where + ".config")
    _check_limits(config, ctx, where + ".config")
    _check_near_misses(config, ctx, where + ".config")
    prompts = item.get("prompts")
    if prompts is not None:
        prompts = [str(p) for p in as_list(prompts)]
    delay = item.get("delay") or 0
    from factcli.scripting.transforms import check_transform

    return ProviderSpec(
        id=pid.strip(), label=item.get("label"), config=config, prompts=prompts,
        delay_ms=number(delay, ctx.file, where + ".delay"),
        transform=check_transform(item.get("transform"), ctx.file, where + ".transform", ctx.base),
    )


# The config keys factcli reads itself or knows the API takes. Any other key passes through to the
# API (contract), unless it is a near miss of one of these: `temprature` is a typo, not a parameter.
KNOWN_CONFIG_KEYS = {
    "apiBaseUrl", "apiHost", "apiKey", "apiKeyEnvar", "apiVersion", "organization", "headers", "timeout",
    "maxConcurrency", "rpm", "tpm", "models", "max_retries", "api_base", "api_key", "extra_headers",
}


def _check_near_misses(config: dict, ctx: Ctx, where: str) -> None:
    import difflib

    from factcli.providers.litellm_provider import PASSTHROUGH

    known = KNOWN_CONFIG_KEYS | PASSTHROUGH
    for key in config:
        if key in known or not isinstance(key, str):
            continue
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.85)
        if close:
            raise ConfigError(f"unknown parameter '{key}'; did you mean '{close[0]}'? (other keys are sent to "
                              "the API as they are)", ctx.file, f"{where}.{key}")


def _check_limits(config: dict, ctx: Ctx, where: str) -> None:
    """maxConcurrency, rpm and tpm (run/limits.py) are factcli's: a bad value is an error here, not a
    parameter the API rejects."""
    for key in ("maxConcurrency", "rpm", "tpm"):
        value = config.get(key)
        if value is None:
            continue
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
        if key == "maxConcurrency":
            ok = ok and float(value).is_integer()
        expect(ok, f"expected a positive {'whole ' if key == 'maxConcurrency' else ''}number, got {value!r}",
               ctx.file, f"{where}.{key}")
