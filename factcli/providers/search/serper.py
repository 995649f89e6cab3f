"""Google results through Serper (serper.dev): `POST {base}/search` with the key in `X-API-KEY` and a
JSON body `{"q", "num"}`; organic results are `organic: [{title, link, snippet}]`, and an `answerBox`,
when Google shows one, comes first (SAFE reads it too). One credit per search of up to 10 results: $50
for 50,000 credits on the first paid tier, $0.001 a search (`costPerSearch` to use your tier's price).
"""

from __future__ import annotations

from factcli.providers.search.base import SearchBackend, register_backend, result


@register_backend("serper")
class SerperSearch(SearchBackend):
    key_envar = "SERPER_API_KEY"
    default_base = "https://google.serper.dev"
    price = 0.001
    max_results = 100
    options = ("gl", "hl")

    async def search(self, query: str, results: int) -> list[dict]:
        body = {"q": query, "num": results, **{k: self.config[k] for k in self.options if k in self.config}}
        data = await self.request("POST", f"{self.base_url}/search", body=body,
                                  headers={"X-API-KEY": self.api_key(), "Content-Type": "application/json"})
        data = data if isinstance(data, dict) else {}
        out = []
        box = data.get("answerBox")
        if isinstance(box, dict) and (box.get("answer") or box.get("snippet")):
            out.append(result(box.get("title") or "Answer box", box.get("link"),
                              " ".join(str(box[k]) for k in ("answer", "snippet") if box.get(k))))
        out += [result(r.get("title"), r.get("link"), r.get("snippet")) for r in data.get("organic") or []
                if isinstance(r, dict)]
        return out[:results]
