"""Stand-in search APIs on 127.0.0.1, one per backend, each checking the request its vendor documents
and answering in the vendor's response layout. Each backend lives under its own prefix, which the
tests give as `apiBaseUrl`:

  serper   POST {url}/serper/search                 X-API-KEY            JSON {q, num}       -> {organic: [{title, link, snippet}]}
  brave    GET  {url}/brave/res/v1/web/search       X-Subscription-Token ?q&count            -> {web: {results: [{title, url, description}]}}
  tavily   POST {url}/tavily/search                 Authorization Bearer JSON {query, max_results} -> {results: [{title, url, content}]}
  google   GET  {url}/google/customsearch/v1        ?key&cx&q&num                            -> {items: [{title, link, snippet}]}
  searxng  GET  {url}/searxng/search                (none)               ?q&format=json      -> {results: [{title, url, content}]}

A request without the right key gets 401 (403 for Google), one missing a documented field 400. The
results are the documents of `docs` ({title, url, text}) that share the most words with the query.
`fail(status, retry_after)` queues a fault for the next requests. Every request is recorded.
"""

from __future__ import annotations

import json
import re

from aiohttp import web
from local_server import LocalServer

KEY = "test-search-key-7f3a9c"  # what the tests put in the key variables
CX = "engine-123"


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}


class FakeSearch(LocalServer):
    name = "FakeSearch"

    def __init__(self, docs: list[dict] | None = None):
        self.docs = list(docs or [])
        self.requests: list[dict] = []
        self.faults: list[tuple[int, str | None]] = []
        self.serper_extras: dict = {}  # answerBox / knowledgeGraph, in Serper's layout, added to every answer

    # ------------------------------------------------------------ results

    def rank(self, query: str, n: int) -> list[dict]:
        q = _words(query)
        scored = [(len(q & _words(d["title"] + " " + d["text"])), i, d) for i, d in enumerate(self.docs)]
        return [d for score, _, d in sorted(scored, key=lambda t: (-t[0], t[1])) if score][:n]

    def fail(self, status: int, retry_after: str | None = None, times: int = 1) -> None:
        self.faults.extend([(status, retry_after)] * times)

    def by(self, backend: str) -> list[dict]:
        return [r for r in self.requests if r["backend"] == backend]

    # ------------------------------------------------------------ handlers

    async def _record(self, request: web.Request, backend: str) -> tuple[dict, web.Response | None]:
        raw = await request.read()
        body = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        entry = {"backend": backend, "method": request.method, "path": request.path,
                 "headers": dict(request.headers), "query": dict(request.query), "body": body}
        self.requests.append(entry)
        if self.faults:
            status, retry_after = self.faults.pop(0)
            headers = {"Retry-After": retry_after} if retry_after is not None else {}
            return entry, web.json_response({"error": f"fault {status}"}, status=status, headers=headers)
        return entry, None

    async def serper(self, request):
        entry, fault = await self._record(request, "serper")
        if fault:
            return fault
        if request.headers.get("X-API-KEY") != KEY:
            return web.json_response({"message": "Unauthorized."}, status=401)
        body = entry["body"]
        if not isinstance(body, dict) or not isinstance(body.get("q"), str):
            return web.json_response({"message": "q is required"}, status=400)
        found = self.rank(body["q"], int(body.get("num", 10)))
        return web.json_response({"searchParameters": {"q": body["q"], "type": "search"}, **self.serper_extras,
                                  "organic": [{"title": d["title"], "link": d["url"], "snippet": d["text"],
                                               "position": i + 1} for i, d in enumerate(found)]})

    async def brave(self, request):
        entry, fault = await self._record(request, "brave")
        if fault:
            return fault
        if request.headers.get("X-Subscription-Token") != KEY:
            return web.json_response({"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID"}},
                                     status=401)
        q = request.query.get("q")
        if not q:
            return web.json_response({"type": "ErrorResponse"}, status=400)
        found = self.rank(q, int(request.query.get("count", 20)))
        return web.json_response({"type": "search", "query": {"original": q},
                                  "web": {"type": "search", "results": [
                                      {"title": d["title"], "url": d["url"], "description": d["text"]} for d in found]}})

    async def tavily(self, request):
        entry, fault = await self._record(request, "tavily")
        if fault:
            return fault
        if request.headers.get("Authorization") != f"Bearer {KEY}":
            return web.json_response({"detail": {"error": "Unauthorized: missing or invalid API key."}}, status=401)
        body = entry["body"]
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            return web.json_response({"detail": {"error": "query is required"}}, status=400)
        found = self.rank(body["query"], int(body.get("max_results", 5)))
        return web.json_response({"query": body["query"], "response_time": 0.1, "results": [
            {"title": d["title"], "url": d["url"], "content": d["text"], "score": 0.9} for d in found]})

    async def google(self, request):
        entry, fault = await self._record(request, "google")
        if fault:
            return fault
        if request.query.get("key") != KEY:
            return web.json_response({"error": {"code": 403, "message": "API key not valid."}}, status=403)
        if request.query.get("cx") != CX or not request.query.get("q"):
            return web.json_response({"error": {"code": 400, "message": "Invalid Value"}}, status=400)
        found = self.rank(request.query["q"], int(request.query.get("num", 10)))
        return web.json_response({"kind": "customsearch#search", "items": [
            {"kind": "customsearch#result", "title": d["title"], "link": d["url"], "snippet": d["text"]}
            for d in found]})

    async def searxng(self, request):
        entry, fault = await self._record(request, "searxng")
        if fault:
            return fault
        if request.query.get("format") != "json" or not request.query.get("q"):
            return web.Response(status=403, text="format not allowed")
        found = self.rank(request.query["q"], 100)
        return web.json_response({"query": request.query["q"], "results": [
            {"title": d["title"], "url": d["url"], "content": d["text"], "engine": "fake"} for d in found]})

    # ------------------------------------------------------------ lifecycle

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/serper/search", self.serper)
        app.router.add_get("/brave/res/v1/web/search", self.brave)
        app.router.add_post("/tavily/search", self.tavily)
        app.router.add_get("/google/customsearch/v1", self.google)
        app.router.add_get("/searxng/search", self.searxng)
