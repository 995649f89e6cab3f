"""The provider registry: one place to add a provider. Any id no registered prefix claims goes to litellm."""

from __future__ import annotations

from pathlib import Path

from factcli.errors import ConfigError
from factcli.providers.base import FACTORIES, Provider
from factcli.types import ProviderSpec


def _provider_class(pid: str) -> type:
    _load_builtins()
    for test, cls in FACTORIES:
        if test(pid):
            return cls
    from factcli.providers.litellm_provider import LiteLLMProvider

    return LiteLLMProvider


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
    else:
        from factcli.providers.litellm_provider import validate_id

        validate_id(spec.id, file, where)


_loaded = False


def _load_builtins() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from factcli.providers import echo, openai_provider, script  # noqa: F401
