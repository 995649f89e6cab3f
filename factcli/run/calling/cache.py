"""The caches, diskcache under FACTCLI_HOME: model responses, keyed by what decides the output, and
downloaded tests (Hugging Face dataset rows, test files at a URL), keyed by the URL.

Only what can be used is stored, for 14 days: never an error response nor an empty output, never a
grader's reply its step's schema refuses or that was cut off, and no reply of a grading that failed
(run/calling/caller.py says how, for every step of every method). The key never contains a secret in clear: secrets are dropped before hashing, only
the response (no request) is stored, and a download's key is its URL alone (the token a request
carried is a header: in no key and no value).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from factcli import settings
from factcli.run.calling.limits import LIMIT_KEYS
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
    encoder = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str)
    if sum(len(m.get("content") or "") if isinstance(m.get("content"), str) else 0 for m in messages) < 1 << 20:
        return hashlib.sha256(encoder.encode(payload).encode()).hexdigest()
    # a prompt of megabytes: the same text hashed a piece at a time, never joined and encoded whole
    digest = hashlib.sha256()
    for piece in encoder.iterencode(payload):
        digest.update(piece.encode())
    return digest.hexdigest()


def _private_disk():
    """diskcache's Disk, that makes each file of a large value readable by this user alone (0600)."""
    import diskcache

    class PrivateDisk(diskcache.Disk):
        def _write(self, full_path, *args, **kwargs):
            size = super()._write(full_path, *args, **kwargs)
            os.chmod(full_path, 0o600)
            return size

    return PrivateDisk


class _DiskCache:
    """One diskcache folder, opened on first use."""

    def __init__(self, directory: Path, ttl: float):
        self.directory = Path(directory)
        self.ttl = ttl
        self._cache = None

    def _open(self):
        if self._cache is None:
            import diskcache

            self.directory.mkdir(parents=True, exist_ok=True)
            # replies may quote what a prompt held: this user's alone (the downloads' folder and the
            # cache folder above it too)
            os.chmod(self.directory, 0o700)
            if settings.cache_dir() in self.directory.parents:
                os.chmod(settings.cache_dir(), 0o700)
            self._cache = diskcache.Cache(str(self.directory), disk=_private_disk())
            for path in self.directory.glob("cache.db*"):
                os.chmod(path, 0o600)
        return self._cache

    def clear(self) -> int:
        cache = self._open()
        n = len(cache)
        cache.clear()
        return n

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None


class ResponseCache(_DiskCache):
    def __init__(self, directory: Path | None = None, ttl: float = settings.CACHE_TTL_SECONDS):
        super().__init__(directory or settings.cache_dir(), ttl)

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
        # the secrets rule (store/redact): a reply that quotes a key keeps none on disk
        self._open().set(key, redact.redact(data), expire=self.ttl)

    def delete(self, key: str) -> None:
        self._open().delete(key)


class DownloadCache(_DiskCache):
    """What config/remote.py downloads, by URL, in a folder of its own beside the responses (so that
    clearing either counts its own entries). `refresh`: download again and keep the new copy."""

    def __init__(self, directory: Path | None = None, ttl: float = settings.CACHE_TTL_SECONDS, refresh: bool = False):
        super().__init__(directory or settings.cache_dir() / "downloads", ttl)
        self.refresh = refresh

    @staticmethod
    def key(url: str) -> str:
        return "download:" + hashlib.sha256(url.encode()).hexdigest()

    def get(self, url: str) -> bytes | None:
        if self.refresh:
            return None
        data = self._open().get(self.key(url))
        return data if isinstance(data, bytes) else None

    def set(self, url: str, data: bytes) -> None:
        self._open().set(self.key(url), bytes(data), expire=self.ttl)
