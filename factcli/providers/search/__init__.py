"""Search backends for the methods that check facts against the web (`safe`): one registry, one module
per backend, chosen by `config.search.provider`. Each is a Provider (base.py), so searches are called,
retried, rate-limited, cached, counted and priced by run/calling/caller like model calls.

| provider  | request (vendor's documented API)                                   | key               | price / search |
|-----------|---------------------------------------------------------------------|-------------------|----------------|
| serper    | POST {base}/search, X-API-KEY, JSON {q, num}                        | SERPER_API_KEY    | $0.001         |
| brave     | GET {base}/res/v1/web/search?q&count, X-Subscription-Token          | BRAVE_API_KEY     | $0.005         |
| tavily    | POST {base}/search, Authorization: Bearer, JSON {query, max_results} | TAVILY_API_KEY    | $0.008         |
| google    | GET {base}/customsearch/v1?key&cx&q&num (Programmable Search)       | GOOGLE_API_KEY    | $0.005         |
| searxng   | GET {base}/search?q&format=json (a self-hosted SearxNG)             | none              | free           |
| knowledge | BM25 over a factcli knowledge source (folder, JSONL, SQLite)         | none              | free (offline) |
"""

from __future__ import annotations

from pathlib import Path

from factcli.providers.search.base import BACKENDS, SearchBackend, SearchConfigError

NAMES = ("serper", "brave", "tavily", "google", "searxng", "knowledge")
DEFAULT_RESULTS = 3  # SAFE's num_searches: results shown per query


def _load(name: str) -> type | None:
    if name not in BACKENDS and name in NAMES:
        import importlib

        importlib.import_module(f"factcli.providers.search.{name}")
    return BACKENDS.get(name)


def create_backend(config: dict | None, base_dir: Path | None = None) -> SearchBackend:
    """The backend `config.search` names; SearchConfigError names the bad key."""
    if not isinstance(config, dict):
        raise SearchConfigError("config.search must be a mapping {provider, apiBaseUrl, apiKeyEnvar, results, ...}")
    name = config.get("provider")
    if not isinstance(name, str) or not name.strip():
        raise SearchConfigError(f"config.search.provider is required: one of {', '.join(NAMES)}")
    cls = _load(name.strip().lower())
    if cls is None:
        raise SearchConfigError(f"config.search.provider {name!r} is unknown: use one of {', '.join(NAMES)}")
    backend = cls(config, base_dir)
    backend.check()
    return backend


def results_wanted(config: dict, default: int = DEFAULT_RESULTS) -> int:
    value = config.get("results", default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise SearchConfigError(f"config.search.results must be a whole number from 1 to 100, got {value!r}")
    return value
