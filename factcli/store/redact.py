"""The secrets rule (contract §9) in one place: what counts as a secret, and how to strip it."""

from __future__ import annotations

import os
import re
from typing import Any

SECRET_KEY = re.compile(
    r"api[_-]?key|secret|password|passwd|authorization|access[_-]?token|auth[_-]?token|bearer",
    re.IGNORECASE,
)
SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
HEADER_KEYS = {"headers", "extra_headers"}
REDACTED = "[redacted]"


def secret_env_values() -> dict[str, str]:
    """Values of environment variables whose names look secret, longest first (value -> name)."""
    found = {v: k for k, v in os.environ.items() if SECRET_ENV.search(k) and len(v) >= 6}
    return dict(sorted(found.items(), key=lambda kv: -len(kv[0])))


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY.search(key)) and key.lower() not in ("max_tokens", "maxtokens")


def redact(value: Any, env_values: dict[str, str] | None = None, _key: str = "") -> Any:
    """A copy with secret values replaced: `${NAME}` when the value came from the environment."""
    if env_values is None:
        env_values = secret_env_values()
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            ks = str(k)
            if ks in HEADER_KEYS and isinstance(v, dict):
                out[k] = {hk: _secret_placeholder(hv, env_values) for hk, hv in v.items()}
            elif is_secret_key(ks) and not isinstance(v, (dict, list)) and v not in (None, ""):
                out[k] = _secret_placeholder(v, env_values)
            else:
                out[k] = redact(v, env_values, ks)
        return out
    if isinstance(value, list):
        return [redact(v, env_values, _key) for v in value]
    if isinstance(value, str):
        return scrub_text(value, env_values)
    return value


def _secret_placeholder(value: Any, env_values: dict[str, str]) -> str:
    if isinstance(value, str) and value.startswith("${") and value.endswith("}"):
        return value  # already a reference
    if isinstance(value, str) and value in env_values:
        return "${" + env_values[value] + "}"
    return REDACTED


def scrub_text(text: str, env_values: dict[str, str] | None = None) -> str:
    """Replace any secret environment value that appears inside free text (errors, outputs)."""
    if env_values is None:
        env_values = secret_env_values()
    for value, name in env_values.items():
        if value in text:
            text = text.replace(value, "${" + name + "}")
    return text
