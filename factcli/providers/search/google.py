"""Google's Programmable Search (Custom Search JSON API): `GET {base}/customsearch/v1?key=…&cx=…&q=…&num=…`,
the key and the engine id (`config.search.cx`) in the query string; results are `items: [{title, link,
snippet}]`, at most 10. 100 searches a day are free, then $5 per 1,000: $0.005 a search. Google closed
the API to new customers and ends it on 1 January 2027; existing keys work until then.
"""

from __future__ import annotations

from factcli.providers.search.base import SearchBackend, SearchConfigError, register_backend, result


@register_backend("google")
class GoogleSearch(SearchBackend):
    key_envar = "GOOGLE_API_KEY"
    default_base = "https://www.googleapis.com"
    price = 0.005
    max_results = 10
    options = ("cx", "gl", "lr")

    def check(self) -> None:
        cx = self.config.get("cx")
        if not isinstance(cx, str) or not cx.strip():
            raise SearchConfigError("config.search.cx is required for google: the Programmable Search engine id")

    async def search(self, query: str, results: int) -> list[dict]:
        params = {"key": self.api_key(), "cx": self.config["cx"], "q": query, "num": str(results),
                  **{k: str(self.config[k]) for k in ("gl", "lr") if k in self.config}}
        data = await self.request("GET", f"{self.base_url}/customsearch/v1", params=params)
        items = data.get("items") if isinstance(data, dict) else None
        return [result(r.get("title"), r.get("link"), r.get("snippet")) for r in items or []
                if isinstance(r, dict)][:results]
