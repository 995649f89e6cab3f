"""The provider registry: one place to add a provider. Any id no registered prefix claims goes to litellm."""

from __future__ import annotations

import importlib
import threading
from pathlib import Path

from factcli.errors import ConfigError
from factcli.providers.base import FACTORIES, Provider
from factcli.types import ProviderSpec


def _provider_class(pid: str) -> type:
    for test, cls in FACTORIES:
        if test(pid):
            return cls
    # Built-in modules register their classes as they are imported, one at a time until one claims the
    # id: an `echo` run imports neither the HTTP provider nor the script ones, which its start would pay for.
    # The built-ins claim ids no other does, so the class found does not depend on which came first.
    with _loading:
        while _unloaded:
            before = len(FACTORIES)
            importlib.import_module(f"factcli.providers.{_unloaded.pop(0)}")
            for test, cls in FACTORIES[before:]:
                if test(pid):
                    return cls
        for test, cls in FACTORIES:  # registered by another thread meanwhile
            if test(pid):
                return cls
    from factcli.providers.litellm_provider import LiteLLMProvider

    return LiteLLMProvider


def provider_class(pid: str) -> type:
    """The class that serves the provider id `pid`."""
    return _provider_class(pid)


def create_provider(spec: ProviderSpec, base_dir: Path | None = None) -> Provider:
    return _provider_class(spec.id)(spec, base_dir)


def validate_provider_id(spec: ProviderSpec, file: str, where: str, base_dir: Path) -> None:
    cls = _provider_class(spec.id)
    check = getattr(cls, "validate", None)
    if check:
        try:
            check(spec, base_dir)
        except ConfigError as exc:
            raise ConfigError(exc.detail, file, where) from None
    elif spec.id.startswith("file://"):  # no class claims this file: not a vendor's model either
        raise ConfigError(f"'{spec.id}': a provider from a file is Python (file://provider.py[:fn]), JavaScript or "
                          "TypeScript (file://provider.js, .mjs, .cjs, .ts[:Name]) or a providers list (.yaml, "
                          ".json); for another language use exec: (e.g. exec: ruby provider.rb)", file, where)
    else:
        from factcli.providers.litellm_provider import validate_id

        validate_id(spec.id, file, where)


# the built-in providers' modules not imported yet, in the order they are tried
_unloaded = ["echo", "openai_provider", "script"]
_loading = threading.Lock()
