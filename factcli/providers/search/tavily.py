"""Tavily: `POST {base}/search` with `Authorization: Bearer <key>` and a JSON body `{"query",
"max_results", "search_depth"}`; results are `results: [{title, url, content, score}]`, at most 20. A
basic search is one credit, $0.008 pay-as-you-go; an advanced one (`search_depth: advanced`) two.
"""

from __future__ import annotations

from factcli.providers.search.base import SearchBackend, SearchConfigError, register_backend, result

CREDIT = 0.008


@register_backend("tavily")
class TavilySearch(SearchBackend):
    key_envar = "TAVILY_API_KEY"
    default_base = "https://api.tavily.com"
    price = CREDIT
    max_results = 20
    options = ("search_depth", "topic")

    def check(self) -> None:
        depth = self.config.get("search_depth", "basic")
        if depth not in ("basic", "advanced"):
            raise SearchConfigError(f"config.search.search_depth must be basic or advanced, got {depth!r}")
        if depth == "advanced" and self.config.get("costPerSearch") is None:
            self.price = self.call_price = 2 * CREDIT

    async def search(self, query: str, results: int) -> list[dict]:
        body = {"query": query, "max_results": results, "search_depth": self.config.get("search_depth", "basic"),
                **{k: self.config[k] for k in self.options if k in self.config}}
        data = await self.request("POST", f"{self.base_url}/search", body=body,
                                  headers={"Authorization": f"Bearer {self.api_key()}", "Content-Type": "application/json"})
        items = data.get("results") if isinstance(data, dict) else None
        return [result(r.get("title"), r.get("url"), r.get("content")) for r in items or []
                if isinstance(r, dict)][:results]
