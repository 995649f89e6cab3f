"""The response cache: diskcache under FACTCLI_HOME, keyed by what decides the output.

Only replies that can be used are stored, for 14 days: never an error response nor an empty
output, and a reply its reader could not use (a grader's reply that is not a verdict) is dropped
again by Caller.forget. The key never contains a secret in clear:
secrets are dropped before hashing, and only the response (no request) is stored.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from factcli import settings
from factcli.run.limits import LIMIT_KEYS
from factcli.store import redact
from factcli.types import ProviderResponse, TokenUsage

CACHE_VERSION = 1


def cache_key(identity: dict, messages: list[dict], repeat_idx: int, extra: dict | None = None,
              request: dict | None = None) -> str:
    """`request`: the call's own request parameters (RenderedPrompt.config), laid over the provider's
    config as the provider lays them, so two calls that send the same request share a key, and two that
    do not never do. Secrets in either are dropped before hashing."""
    config = identity.get("config")
    if request:
        config = {**(config if isinstance(config, dict) else {}), **request}
        identity = {**identity, "config": config}
    if isinstance(config, dict) and any(k in config for k in LIMIT_KEYS):  # they change the pace, not the reply
        identity = {**identity, "config": {k: v for k, v in config.items() if k not in LIMIT_KEYS}}
    payload = {
        "v": CACHE_VERSION,
        "identity": redact.redact(identity, env_values={}),
        "messages": messages,
        "repeat": repeat_idx,
        "extra": extra or {},
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    def __init__(self, directory: Path | None = None, ttl: float = settings.CACHE_TTL_SECONDS):
        self.directory = Path(directory or settings.cache_dir())
        self.ttl = ttl
        self._cache = None

    def _open(self):
        if self._cache is None:
            import diskcache

            self.directory.mkdir(parents=True, exist_ok=True)
            self._cache = diskcache.Cache(str(self.directory))
        return self._cache

    def get(self, key: str) -> ProviderResponse | None:
        data = self._open().get(key)
        if not isinstance(data, dict):
            return None
        usage = TokenUsage(**data.pop("token_usage", {}))
        try:
            resp = ProviderResponse(token_usage=usage, **data)
        except TypeError:  # an entry from another layout
            return None
        if resp.error is not None or resp.output in (None, "", [], {}):  # an entry from before failures were kept out
            return None
        resp.cached = True
        return resp

    def set(self, key: str, resp: ProviderResponse) -> None:
        if resp.error is not None or resp.output in (None, "", [], {}):  # a failure is asked again next time
            return
        data = asdict(resp)
        data["cached"] = False
        data["retries"] = 0
        data["metadata"] = {}
        self._open().set(key, data, expire=self.ttl)

    def delete(self, key: str) -> None:
        self._open().delete(key)

    def clear(self) -> int:
        cache = self._open()
        n = len(cache)
        cache.clear()
        return n

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None
