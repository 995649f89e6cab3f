"""What a search backend is: a Provider whose prompt is a search query and whose output is a list of
results `{title, url, snippet}`. Being a Provider is the point: a search goes through run/calling/caller.Caller
like a model call, so the one owner of retries (429 with Retry-After, 5xx, timeouts), per-endpoint limits
(`rpm`, `maxConcurrency` in `config.search`), the response cache and the budget treats it as one.

A backend is chosen by `config.search.provider` and registered with `register_backend`. The query is
the request's prompt text; the number of results wanted is its prompt's `config["results"]`, which makes it part
of the cache key beside the backend's identity (its name, base URL and request options, never its key).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from factcli.providers.base import (
    AUTH,
    TRANSIENT,
    Provider,
    ProviderCallError,
    http_error,
)
from factcli.providers.request import CallRequest
from factcli.types import ProviderResponse, ProviderSpec, TokenUsage

BACKENDS: dict[str, type] = {}
SNIPPET_CHARS = 1000  # a result's snippet is cut here: vendors' "content" fields can run to pages


class SearchConfigError(ValueError):
    """A bad `config.search`: the handler turns it into its own input error, the preflight into a line."""


def register_backend(name: str):
    def deco(cls):
        cls.name = name
        BACKENDS[name] = cls
        return cls

    return deco


def result(title: Any, url: Any, snippet: Any) -> dict:
    """One search result as every backend returns it."""
    text = " ".join(str(snippet or "").split())
    if len(text) > SNIPPET_CHARS:
        text = text[:SNIPPET_CHARS - 1] + "…"
    return {"title": " ".join(str(title or "").split()), "url": str(url or ""), "snippet": text}


class SearchBackend(Provider):
    """Subclasses set `name`, `key_envar` (None: no key), `default_base`, `price` (USD per search as the
    vendor publishes it, None when free) and implement `search`."""

    name = "search"
    is_search = True  # the row's ledger counts these calls apart (scoring/grading.GraderLedger)
    key_envar: str | None = None
    default_base = ""
    price: float | None = None
    max_results = 10  # the most one request returns
    trims = True  # keep the first `results` of what search() returns (False: search() trims, keeping extras)
    options: tuple[str, ...] = ()  # vendor request options passed through from config.search

    def __init__(self, config: dict, base_dir: Path | None = None):
        super().__init__(ProviderSpec(id=f"search:{self.name}", config=dict(config)), base_dir)
        cost = config.get("costPerSearch")
        if cost is not None:
            if isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost < 0:
                raise SearchConfigError(f"config.search.costPerSearch must be a number ≥ 0 (USD), got {cost!r}")
            self.price = float(cost)
        self.free = self.price is None or self.price == 0
        self.call_price = 0.0 if self.free else self.price

    # ------------------------------------------------------------ configuration

    @property
    def base_url(self) -> str:
        return str(self.config.get("apiBaseUrl") or self.default_base).rstrip("/")

    def cache_identity(self) -> dict:
        return {"id": self.id, "base": self.base_url,
                "options": {k: self.config[k] for k in self.options if k in self.config}}

    def check(self) -> None:
        """Backend-specific keys of config.search, checked before any call (SearchConfigError)."""
        return None

    def key_name(self) -> str | None:
        named = self.config.get("apiKeyEnvar")
        return str(named) if named else self.key_envar

    def preflight(self) -> list[str]:
        name = self.key_name()
        if name is None or self.config.get("apiKey"):
            return []
        if os.environ.get(name):
            return []
        return [f"config.search: the {self.name} search backend needs an API key: set {name}"
                + ("" if self.config.get("apiKeyEnvar") else " (or name another variable with config.search.apiKeyEnvar)")]

    def api_key(self) -> str:
        key = self.config.get("apiKey") or (os.environ.get(self.key_name() or "") if self.key_name() else None)
        if not key:
            raise ProviderCallError(f"the {self.name} search backend has no API key: set {self.key_name()}", AUTH)
        return str(key)

    # ------------------------------------------------------------ calls

    async def call(self, request: CallRequest) -> ProviderResponse:
        wanted = int(request.prompt.config.get("results") or 3)
        found = await self.search(request.prompt.text, min(wanted, self.max_results))
        if self.trims:
            found = found[:wanted]
        return ProviderResponse(output=found, cost=self.call_price, token_usage=TokenUsage(num_requests=1),
                                finish_reason="stop")

    async def search(self, query: str, results: int) -> list[dict]:
        raise NotImplementedError

    async def request(self, method: str, url: str, *, headers: dict | None = None, params: dict | None = None,
                      body: dict | None = None) -> Any:
        """One HTTP request -> its JSON; failures classified for run/calling/caller (429 and 5xx are retried)."""
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=None)  # the Caller owns the per-attempt timeout
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.request(method, url, headers=headers, params=params, json=body) as resp:
                    text = await resp.text()
                    status, resp_headers = resp.status, dict(resp.headers)
        except aiohttp.ClientError as exc:  # refused, reset, dropped mid-response
            # the exception's text may hold the URL, and Google's key travels in it: name the class only
            raise ProviderCallError(f"{self.name} search: connection error ({type(exc).__name__})", TRANSIENT,
                                    unreachable=isinstance(exc, aiohttp.ClientConnectorError)) from None
        if status >= 400:
            raise _classify(self.name, status, text, resp_headers)
        try:
            return json.loads(text)
        except ValueError:
            raise ProviderCallError(f"{self.name} search: the reply is not JSON: {text[:200]}", TRANSIENT) from None


def _classify(name: str, status: int, text: str, headers: dict) -> ProviderCallError:
    return http_error(f"{name} search: HTTP {status}: {' '.join(text.split())[:300] or 'no body'}", status, headers)
