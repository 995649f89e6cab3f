"""A self-hosted SearxNG: `GET {apiBaseUrl}/search?q=…&format=json` (the instance must list `json`
under `search.formats` in its settings.yml); results are `results: [{title, url, content}]`. No key and
no price; `apiBaseUrl` is required, since there is no public default.
"""

from __future__ import annotations

from factcli.providers.search.base import SearchBackend, SearchConfigError, register_backend, result


@register_backend("searxng")
class SearxngSearch(SearchBackend):
    max_results = 100
    options = ("language", "categories", "engines")

    def check(self) -> None:
        if not self.config.get("apiBaseUrl"):
            raise SearchConfigError("config.search.apiBaseUrl is required for searxng: your instance's address")

    async def search(self, query: str, results: int) -> list[dict]:
        params = {"q": query, "format": "json", **{k: str(self.config[k]) for k in self.options if k in self.config}}
        data = await self.request("GET", f"{self.base_url}/search", params=params, headers={"Accept": "application/json"})
        items = data.get("results") if isinstance(data, dict) else None
        return [result(r.get("title"), r.get("url"), r.get("content")) for r in items or []
                if isinstance(r, dict)][:results]
