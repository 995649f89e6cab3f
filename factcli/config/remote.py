"""Tests kept elsewhere: `huggingface://datasets/OWNER/REPO?…` (the datasets-server `/rows` API, as
promptfoo 0.121.20 reads it) and test files at `http(s)://` URLs (public Google Sheets as their CSV export).

Every download goes through the download store the run installs (`downloading(store)`; run/calling/cache.py
owns it: keyed by the URL, under FACTCLI_HOME); without one, nothing is kept. A Hugging Face token
(HF_TOKEN, then HF_API_TOKEN, then HUGGING_FACE_HUB_TOKEN) is sent as a header and is in no key, no
stored byte and no message. Every failure is one ConfigError naming the dataset or the URL, raised
while the config loads, so no model is called.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from factcli.activity import activity
from factcli.errors import ConfigError

HF_PREFIX = "huggingface://datasets/"
DEFAULT_DATASETS_SERVER = "https://datasets-server.huggingface.co"
PAGE_ROWS = 100  # the most the datasets-server's /rows gives in one answer
TOKEN_VARIABLES = ("HF_TOKEN", "HF_API_TOKEN", "HUGGING_FACE_HUB_TOKEN")
TIMEOUT_S = 60.0
_SHEET = re.compile(r"^https://docs\.google\.com/spreadsheets/d/([\w-]+)")


class DownloadStore(Protocol):
    def get(self, url: str) -> bytes | None: ...

    def set(self, url: str, data: bytes) -> None: ...


_STORE: ContextVar[DownloadStore | None] = ContextVar("factcli_download_store", default=None)


@contextmanager
def downloading(store: DownloadStore | None) -> Iterator[None]:
    """Downloads made while the block runs are read from and kept in `store` (None: not kept)."""
    token = _STORE.set(store)
    try:
        yield
    finally:
        _STORE.reset(token)


def is_remote(item: Any) -> bool:
    return isinstance(item, str) and (item.startswith(HF_PREFIX) or item.startswith(("http://", "https://")))


# ---------------------------------------------------------------- Hugging Face datasets


def parse_dataset(ref: str, file: str, where: str) -> tuple[str, dict[str, str], int | None]:
    """`huggingface://datasets/OWNER/REPO?split=…` -> (OWNER/REPO, the /rows query, the row limit).
    promptfoo's defaults: split=test, config=default; `subset` names the config too; any other
    parameter is passed on to the server."""
    path, _, query = ref[len(HF_PREFIX):].partition("?")
    parts = [p for p in path.split("/") if p]
    if len(parts) != 2:
        raise ConfigError(f"expected huggingface://datasets/OWNER/REPO[?split=…&config=…&limit=N], got {ref}",
                          file, where)
    params = {"split": "test", "config": "default"}
    given = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
    if "subset" in given:
        subset = given.pop("subset")
        given.setdefault("config", subset)
    params.update(given)
    limit = None
    if "limit" in params:
        text = params.pop("limit")
        if not text.isdigit() or int(text) < 1:
            raise ConfigError(f"{ref}: limit must be a whole number of at least 1, got {text!r}", file, where)
        limit = int(text)
    for key in ("offset", "length"):  # the pages are ours to ask for
        params.pop(key, None)
    return "/".join(parts), params, limit


def hf_token() -> str | None:
    return next((os.environ[n] for n in TOKEN_VARIABLES if os.environ.get(n)), None)


def _endpoint(ref: str, file: str, where: str) -> tuple[str, str, str, dict, int | None]:
    """-> (dataset, the /rows URL without paging, its cache key, the token header, the row limit)."""
    dataset, params, limit = parse_dataset(ref, file, where)
    server = (os.environ.get("FACTCLI_HF_DATASETS_SERVER") or DEFAULT_DATASETS_SERVER).rstrip("/")
    base = f"{server}/rows?{urllib.parse.urlencode({'dataset': dataset, **params})}"
    headers = {"Authorization": f"Bearer {t}"} if (t := hf_token()) else {}
    return dataset, base, base + (f"&limit={limit}" if limit else ""), headers, limit


def dataset_pages(ref: str, file: str, where: str, *, keep: bool = True) -> tuple[list[dict], list[int]]:
    """Every row as the pages give it, and the indices of the rows whose cells the server cut short
    (it does so to keep a page small); `whole_row` reads one of those whole. A caller that needs a
    few rows (calibrate --benchmark's sample) asks for those alone. `keep`: kept in the download store."""
    dataset, base, key, headers, limit = _endpoint(ref, file, where)
    store = _STORE.get() if keep else None
    cached = store.get(key + "&pages=1") if store is not None else None
    if cached is not None:
        kept = json.loads(cached)
        return kept["rows"], kept["cut"]
    rows: list[dict] = []
    cut: list[int] = []
    total: int | None = None
    name = f"{dataset} ({dict(urllib.parse.parse_qsl(base.partition('?')[2]))['split']})"
    while limit is None or len(rows) < limit:
        length = PAGE_ROWS if limit is None else min(PAGE_ROWS, limit - len(rows))
        url = f"{base}&offset={len(rows)}&length={length}"
        of = f" of {total:,}" if total is not None else ""
        with activity(f"Downloading {name}: {len(rows):,}{of} rows"):
            answer = _get_json(url, headers, f"Hugging Face dataset {dataset}", file, where)
        page = answer.get("rows") if isinstance(answer, dict) else None
        if not isinstance(page, list):
            raise ConfigError(f"Hugging Face dataset {dataset}: the server's answer has no rows", file, where)
        for item in page:
            row = item.get("row") if isinstance(item, dict) else None
            if not isinstance(row, dict):
                raise ConfigError(f"Hugging Face dataset {dataset}: a row of the server's answer is not a mapping",
                                  file, where)
            if item.get("truncated_cells"):
                cut.append(len(rows))
            rows.append(row)
        total = answer.get("num_rows_total") if isinstance(answer.get("num_rows_total"), int) else len(rows)
        if not page or len(rows) >= total:
            break
    if limit is not None:
        rows = rows[:limit]
        cut = [i for i in cut if i < limit]
    if store is not None:
        store.set(key + "&pages=1", json.dumps({"rows": rows, "cut": cut}, ensure_ascii=False).encode())
    return rows, cut


def dataset_rows(ref: str, file: str, where: str) -> list[dict]:
    """Every row of the dataset (up to its limit), each a mapping of column -> value, in order; a row
    whose cells a page cut short is read whole on a page of its own."""
    _, _, key, _, _ = _endpoint(ref, file, where)
    store = _STORE.get()
    cached = store.get(key) if store is not None else None
    if cached is not None:
        return json.loads(cached)
    rows, cut = dataset_pages(ref, file, where, keep=False)
    for i in cut:
        rows[i] = whole_row(ref, i, file, where)
    if store is not None:
        store.set(key, json.dumps(rows, ensure_ascii=False).encode())
    return rows


def whole_row(ref: str, index: int, file: str, where: str) -> dict:
    """Row `index` on a page of its own (kept in the download store); a cell still cut short is an
    error, never a shortened value."""
    dataset, base, _, headers, _ = _endpoint(ref, file, where)
    url = f"{base}&offset={index}&length=1"
    store = _STORE.get()
    cached = store.get(url) if store is not None else None
    if cached is not None:
        return json.loads(cached)
    answer = _get_json(url, headers, f"Hugging Face dataset {dataset}", file, where)
    page = answer.get("rows") if isinstance(answer, dict) else None
    item = page[0] if isinstance(page, list) and page and isinstance(page[0], dict) else {}
    row = item.get("row")
    if not isinstance(row, dict):
        raise ConfigError(f"Hugging Face dataset {dataset}: row {index} is missing from the server's answer",
                          file, where)
    if item.get("truncated_cells"):
        raise ConfigError(f"Hugging Face dataset {dataset}: row {index} has cells the server cuts short even alone "
                          f"({', '.join(map(str, item['truncated_cells']))})", file, where)
    if store is not None:
        store.set(url, json.dumps(row, ensure_ascii=False).encode())
    return row


def dataset_tests(ref: str, file: str, where: str) -> list[dict]:
    """One test per row: its columns are the test's vars (data: never rendered as templates)."""
    return [{"vars": dict(row)} for row in dataset_rows(ref, file, where)]


# ---------------------------------------------------------------- test files at a URL


def sheet_csv_url(url: str) -> str | None:
    """A public Google Sheet's CSV export (its first sheet, or the `gid` the URL names), as promptfoo
    reads a sheet without credentials."""
    m = _SHEET.match(url)
    if not m:
        return None
    gid = re.search(r"[#&?]gid=(\d+)", url)
    return f"https://docs.google.com/spreadsheets/d/{m.group(1)}/export?format=csv" + (
        f"&gid={gid.group(1)}" if gid else "")


def url_suffix(url: str) -> str:
    path = urllib.parse.urlsplit(url).path.lower()
    return next((s for s in (".csv", ".jsonl", ".json", ".yaml", ".yml") if path.endswith(s)), "")


def shown(url: str) -> str:
    """The URL as messages print it: a `user:password@` in it is not repeated."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


def download(url: str, file: str, where: str) -> bytes:
    store = _STORE.get()
    cached = store.get(url) if store is not None else None
    if cached is not None:
        return cached
    with activity(f"Downloading {shown(url)}"):
        data = _get(url, {}, shown(url), file, where)
    if store is not None:
        store.set(url, data)
    return data


def _get_json(url: str, headers: dict, what: str, file: str, where: str) -> Any:
    data = _get(url, headers, what, file, where)
    try:
        return json.loads(data)
    except ValueError:
        raise ConfigError(f"{what}: the server's answer is not JSON ({_start(data)})", file, where) from None


def _get(url: str, headers: dict, what: str, file: str, where: str) -> bytes:
    import urllib.error  # here: with http.client, a cost of every command's start, for configs that download nothing
    import urllib.request

    request = urllib.request.Request(url, headers={"User-Agent": "factcli", **headers})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        raise ConfigError(f"{what}: {_http_problem(exc, bool(headers), what.startswith('Hugging Face'))}", file,
                          where) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise ConfigError(f"{what}: cannot download ({reason})", file, where) from None


def _http_problem(exc, sent_token: bool, hub: bool) -> str:
    detail = ""
    try:
        body = json.loads(exc.read() or b"{}")
        detail = body.get("error", "") if isinstance(body, dict) else ""
    except (ValueError, OSError):
        pass
    detail = f": {detail}" if isinstance(detail, str) and detail else ""
    if exc.code in (401, 403) and hub:
        fix = ("the token in " + "/".join(TOKEN_VARIABLES) + " has no access (accept the dataset's terms on "
               "its Hub page)") if sent_token else f"a gated or private dataset needs a token: set {TOKEN_VARIABLES[0]}"
        return f"HTTP {exc.code} (not allowed{detail}); {fix}"
    if exc.code == 404 and hub:
        return f"HTTP 404 (not found{detail}); check the dataset's name, its split and its config"
    return f"HTTP {exc.code} {exc.reason}{detail}"


def _start(data: bytes) -> str:
    text = data[:60].decode("utf-8", "replace").replace("\n", " ")
    return f"starts {text!r}" if text else "empty"
