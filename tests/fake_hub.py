"""A stand-in for the Hugging Face datasets-server (`GET /rows`) and a plain file host, on 127.0.0.1.

Real HTTP (the standard library's threading server), so factcli's downloads run their real client code.
Every request is recorded (path, query, headers) for tests to count and inspect.

    with FakeHub() as hub:
        hub.add_dataset("basicv8vc/SimpleQA", rows, split="test", config="default", gated_token=None)
        hub.add_file("tests.csv", b"question\\r\\nhi\\r\\n")
        hub.url            # http://127.0.0.1:PORT  (FACTCLI_HF_DATASETS_SERVER)
        hub.file_url("tests.csv")
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_PAGE = 100  # the real server's most rows per answer
CUT_CHARS = 100


@dataclass
class Dataset:
    rows: list[dict]
    gated_token: str | None = None  # the one token that may read it


@dataclass
class Request:
    path: str
    query: dict
    headers: dict


@dataclass
class FakeHub:
    datasets: dict = field(default_factory=dict)  # (name, config, split) -> Dataset
    files: dict = field(default_factory=dict)  # name -> (bytes, content type)
    requests: list = field(default_factory=list)
    # Like the real server, cut long string cells (to CUT_CHARS, listed in `truncated_cells`) when a
    # page of more than one row would be larger than this many bytes; None: never.
    page_bytes: int | None = None

    def add_dataset(self, name: str, rows: list[dict], *, split: str = "test", config: str = "default",
                    gated_token: str | None = None) -> None:
        self.datasets[(name, config, split)] = Dataset(rows, gated_token)

    def add_file(self, name: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        self.files[name] = (data, content_type)

    def file_url(self, name: str) -> str:
        return f"{self.url}/files/{name}"

    def rows_requests(self) -> list[Request]:
        return [r for r in self.requests if r.path == "/rows"]

    def __enter__(self) -> FakeHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # noqa: N802 - the standard library's name
                split = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
                hub.requests.append(Request(split.path, query, dict(self.headers)))
                if split.path == "/rows":
                    return self._rows(query)
                if split.path.startswith("/files/"):
                    found = hub.files.get(split.path[len("/files/"):])
                    if found is None:
                        return self._send(404, b"no such file", "text/plain")
                    return self._send(200, found[0], found[1])
                return self._send(404, b"{}", "application/json")

            def _rows(self, q: dict):
                key = (q.get("dataset"), q.get("config"), q.get("split"))
                ds = hub.datasets.get(key)
                if ds is None:
                    known = any(k[0] == q.get("dataset") for k in hub.datasets)
                    msg = "Not found." if known else ("The dataset does not exist, or is not accessible without "
                                                      "authentication (private or gated).")
                    return self._json(404, {"error": msg})
                if ds.gated_token is not None and self.headers.get("Authorization") != f"Bearer {ds.gated_token}":
                    return self._json(401, {"error": "The dataset does not exist, or is not accessible without "
                                                     "authentication (private or gated)."})
                offset, length = int(q.get("offset", 0)), int(q.get("length", MAX_PAGE))
                if length > MAX_PAGE:
                    return self._json(422, {"error": "Parameter 'length' must not be greater than 100"})
                page = ds.rows[offset:offset + length]
                features = [{"feature_idx": i, "name": n, "type": {"dtype": "string", "_type": "Value"}}
                            for i, n in enumerate(ds.rows[0] if ds.rows else {})]
                items = [{"row_idx": offset + i, "row": r, "truncated_cells": []} for i, r in enumerate(page)]
                if hub.page_bytes is not None and len(page) > 1 and len(json.dumps(page)) > hub.page_bytes:
                    for item in items:
                        long = [k for k, v in item["row"].items() if isinstance(v, str) and len(v) > CUT_CHARS]
                        item["row"] = {k: (v[:CUT_CHARS] if k in long else v) for k, v in item["row"].items()}
                        item["truncated_cells"] = long
                self._json(200, {"features": features,
                                 "rows": items,
                                 "num_rows_total": len(ds.rows), "num_rows_per_page": MAX_PAGE, "partial": False})

            def _json(self, status: int, body: dict):
                self._send(status, json.dumps(body).encode(), "application/json")

            def _send(self, status: int, data: bytes, content_type: str):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
