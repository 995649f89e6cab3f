"""Google results through Serper (serper.dev): `POST {base}/search` with the key in `X-API-KEY` and a
JSON body `{"q", "num"}`; organic results are `organic: [{title, link, snippet}]`. When Google shows an
`answerBox` or a `knowledgeGraph` ({title, type, description, attributes}), each comes first as one more
result, on top of the `num` organic ones, as SAFE's Serper reader keeps them (answer, snippet and
highlighted snippet of the box; "<title>: <type>.", the description and "<title> <attribute>: <value>."
of the graph), marked `extra: true`. One credit per search of up to 10 results: $50 for 50,000 credits on the first paid
tier, $0.001 a search (`costPerSearch` to use your tier's price).
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
    trims = False  # the answer box and the knowledge graph come on top of the organic results

    async def search(self, query: str, results: int) -> list[dict]:
        body = {"q": query, "num": results, **{k: self.config[k] for k in self.options if k in self.config}}
        data = await self.request("POST", f"{self.base_url}/search", body=body,
                                  headers={"X-API-KEY": self.api_key(), "Content-Type": "application/json"})
        data = data if isinstance(data, dict) else {}
        # marked `extra`: VeriScore reads the organic results only (methods/safe.py drops these there)
        out = [{**found, "extra": True} for found in (_answer_box(data.get("answerBox")),
                                                     _knowledge_graph(data.get("knowledgeGraph")))
               if found is not None]
        organic = [result(r.get("title"), r.get("link"), r.get("snippet")) for r in data.get("organic") or []
                   if isinstance(r, dict)]
        return out + organic[:results]


def _answer_box(box) -> dict | None:
    if not isinstance(box, dict):
        return None
    parts = [str(box[k]).replace("\n", " ") for k in ("answer", "snippet") if isinstance(box.get(k), str) and box[k]]
    highlighted = box.get("snippetHighlighted")
    if isinstance(highlighted, list):
        parts += [str(h) for h in highlighted if h]
    elif isinstance(highlighted, str) and highlighted:
        parts.append(highlighted)
    return result(box.get("title") or "Answer box", box.get("link"), " ".join(parts)) if parts else None


def _knowledge_graph(kg) -> dict | None:
    if not isinstance(kg, dict):
        return None
    title = str(kg.get("title") or "")
    parts = []
    if kg.get("type"):
        parts.append(f"{title}: {kg['type']}.")
    if kg.get("description"):
        parts.append(str(kg["description"]))
    attributes = kg.get("attributes")
    if isinstance(attributes, dict):
        parts += [f"{title} {k}: {v}." for k, v in attributes.items()]
    if not parts:
        return None
    return result(title or "Knowledge graph", kg.get("descriptionLink") or kg.get("website"), " ".join(parts))
