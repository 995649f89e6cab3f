"""Brave Search API: `GET {base}/res/v1/web/search?q=…&count=…` with the key in `X-Subscription-Token`
and `Accept: application/json`; results are `web.results: [{title, url, description}]`, at most 20 a
request. Brave publishes $5 per 1,000 requests on its Search plan: $0.005 a search (`costPerSearch`).
"""

from __future__ import annotations

from factcli.providers.search.base import SearchBackend, register_backend, result


@register_backend("brave")
class BraveSearch(SearchBackend):
    key_envar = "BRAVE_API_KEY"
    default_base = "https://api.search.brave.com"
    price = 0.005
    max_results = 20
    options = ("country", "search_lang", "safesearch")

    async def search(self, query: str, results: int) -> list[dict]:
        params = {"q": query, "count": str(results), **{k: str(self.config[k]) for k in self.options if k in self.config}}
        data = await self.request("GET", f"{self.base_url}/res/v1/web/search", params=params,
                                  headers={"X-Subscription-Token": self.api_key(), "Accept": "application/json"})
        web = data.get("web") if isinstance(data, dict) else None
        items = web.get("results") if isinstance(web, dict) else None
        return [result(r.get("title"), r.get("url"), r.get("description")) for r in items or []
                if isinstance(r, dict)][:results]
