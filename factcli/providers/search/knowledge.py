"""Knowledge sources for fact verification: documents, their passages and retrieval (FActScore's side,
and the `knowledge` search backend: the offline stand-in for a web search, at the end of this module).

A knowledge source is a set of titled documents, from one of:
- a folder of `.txt` / `.md` files (searched recursively); a document's title is its file name
  without the extension (`Marie Curie.txt` -> "Marie Curie");
- a JSONL file of `{"title": ..., "text": ...}` lines (`text` may be a list of strings, as in
  FActScore's own JSONL);
- a SQLite database with a table `documents(title, text)`, the layout FActScore builds
  (`enwiki-20230401.db`); FActScore's pre-chunked rows (passages joined by
  `####SPECIAL####SEPARATOR####`) keep their passage boundaries;
- in-memory text (the assertion's reference `value` or the `context` var).

Documents are split into passages and ranked by BM25 (factcli/stats/text.py: nothing is downloaded
at run time). With a topic, retrieval is restricted to the topic's own document, as FActScore does:
each topic gets its own small index, built on first use. Without a topic, one index over every
passage of the source is built on first use.

Every source is loaded once per process: file sources are cached by resolved path, modification
time and size (for a folder: of every file in it) and passage size; in-memory text by its hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Iterable

from factcli.activity import activity
from factcli.stats.text import DEFAULT_PASSAGE_WORDS, Passage, PassageIndex, split_passages

TEXT_SUFFIXES = (".txt", ".md", ".markdown")
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


class KnowledgeError(Exception):
    """The knowledge source cannot be used (missing file, bad format, unknown topic)."""


def _norm_title(title: str) -> str:
    return " ".join(title.replace("_", " ").split()).casefold()


class KnowledgeSource:
    """Titled documents, their passages, and retrieval. Thread-safe; indexes are built lazily."""

    MAX_TOPIC_INDEXES = 2048

    def __init__(self, name: str, kind: str, passage_words: int = DEFAULT_PASSAGE_WORDS):
        self.name = name
        self.kind = kind  # folder | jsonl | sqlite | text
        self.passage_words = passage_words
        self._lock = threading.RLock()
        self._docs: dict[str, str | list[str]] = {}  # in-memory sources
        self._by_norm: dict[str, str] = {}
        self._passages: dict[str, list[Passage]] = {}
        self._topic_indexes: OrderedDict[str, PassageIndex] = OrderedDict()
        self._global: PassageIndex | None = None

    # -- documents

    def _add(self, title: str, text: str | list[str]) -> None:
        title = str(title).strip()
        if not title or title in self._docs:
            return  # FActScore skips duplicate titles: the first one wins
        self._docs[title] = text
        self._by_norm.setdefault(_norm_title(title), title)

    def titles(self) -> list[str]:
        return list(self._docs)

    def resolve_title(self, topic: str) -> str | None:
        """The document title for a topic: exact, else ignoring case, '_' vs ' ' and spacing."""
        topic = str(topic).strip()
        if topic in self._docs:
            return topic
        return self._by_norm.get(_norm_title(topic))

    def _raw_text(self, title: str) -> str | list[str] | None:
        return self._docs.get(title)

    def passages(self, title: str) -> list[Passage]:
        with self._lock:
            cached = self._passages.get(title)
            if cached is None:
                raw = self._raw_text(title)
                cached = [Passage(title, i, t) for i, t in enumerate(split_passages(raw or "", self.passage_words))]
                if self.kind != "sqlite":
                    self._passages[title] = cached
            return cached

    def all_passages(self) -> list[Passage]:
        return [p for title in self.titles() for p in self.passages(title)]

    # -- retrieval

    def _topic_index(self, title: str) -> PassageIndex:
        with self._lock:
            index = self._topic_indexes.get(title)
            if index is None:
                index = PassageIndex(self.passages(title))
                self._topic_indexes[title] = index
                while len(self._topic_indexes) > self.MAX_TOPIC_INDEXES:
                    self._topic_indexes.popitem(last=False)
            else:
                self._topic_indexes.move_to_end(title)
            return index

    def _global_index(self) -> PassageIndex:
        with self._lock:
            if self._global is None:
                with activity(f"Reading every passage of {Path(self.name).name}"):
                    passages = self.all_passages()
                self._global = PassageIndex(passages)
            return self._global

    def topic_title(self, topic: str | None) -> str | None:
        """The title retrieval is restricted to, or None for the whole source; unknown topic: error."""
        if topic is None or not str(topic).strip():
            return None
        title = self.resolve_title(str(topic))
        if title is None:
            raise KnowledgeError(f"topic {str(topic)!r} is not a document title in the knowledge source "
                                 f"{self.name}{self.title_hint(str(topic))}")
        return title

    def title_hint(self, topic: str) -> str:
        """` (did you mean 'Canberra'?)` from the source's titles; nothing for a SQLite dump whose titles
        are not loaded (listing millions of them to suggest one is not worth it)."""
        import difflib

        if self.kind == "sqlite" and getattr(self, "_titles", None) is None:
            return ""
        titles = self.titles()
        by_fold = {t.casefold(): t for t in titles}
        close = difflib.get_close_matches(topic.strip().casefold(), list(by_fold), n=1, cutoff=0.6)
        return f" (did you mean {by_fold[close[0]]!r}?)" if close else ""

    def retrieve(self, query: str, k: int = 5, topic: str | None = None) -> list[Passage]:
        """The top-k passages for a query, best first; within the topic's document when given."""
        title = self.topic_title(topic)
        index = self._topic_index(title) if title is not None else self._global_index()
        return [p for p, _ in index.search(query, k)]


class _SqliteSource(KnowledgeSource):
    """FActScore's `documents(title, text)` table, read per title (an 18 GB dump stays on disk)."""

    def __init__(self, path: Path, passage_words: int):
        super().__init__(str(path), "sqlite", passage_words)
        self.path = path
        self._titles: list[str] | None = None
        self._text_cache: OrderedDict[str, str | None] = OrderedDict()
        try:
            with self._connect() as conn:
                cols = {row[1] for row in conn.execute("PRAGMA table_info(documents)")}
        except sqlite3.DatabaseError as exc:
            raise KnowledgeError(f"{path}: not a readable SQLite database ({exc})") from None
        if not {"title", "text"} <= cols:
            raise KnowledgeError(f"{path}: expected a table documents(title, text)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)

    def titles(self) -> list[str]:
        with self._lock:
            if self._titles is None:
                with self._connect() as conn:
                    seen: dict[str, None] = {}
                    for (title,) in conn.execute("SELECT title FROM documents ORDER BY rowid"):
                        if title is not None:
                            seen.setdefault(str(title), None)
                self._titles = list(seen)
                for t in self._titles:
                    self._by_norm.setdefault(_norm_title(t), t)
            return self._titles

    def _fetch(self, title: str) -> str | None:
        if title in self._text_cache:
            return self._text_cache[title]
        with self._connect() as conn:
            row = conn.execute("SELECT text FROM documents WHERE title = ? LIMIT 1", (title,)).fetchone()
        text = None if row is None or row[0] is None else str(row[0])
        self._text_cache[title] = text
        while len(self._text_cache) > 256:
            self._text_cache.popitem(last=False)
        return text

    def resolve_title(self, topic: str) -> str | None:
        topic = str(topic).strip()
        for candidate in dict.fromkeys([topic, topic.replace("_", " "), topic.replace(" ", "_")]):
            if self._fetch(candidate) is not None:
                return candidate
        if self._titles is not None:  # the full title list is loaded: match loosely too
            return self._by_norm.get(_norm_title(topic))
        return None

    def _raw_text(self, title: str) -> str | None:
        return self._fetch(title)

    def passages(self, title: str) -> list[Passage]:
        with self._lock:
            cached = self._passages.get(title)
            if cached is None:
                cached = [Passage(title, i, t) for i, t in
                          enumerate(split_passages(self._fetch(title) or "", self.passage_words))]
                self._passages[title] = cached
                while len(self._passages) > self.MAX_TOPIC_INDEXES:
                    self._passages.pop(next(iter(self._passages)))
            return cached

    def all_passages(self) -> list[Passage]:
        out: list[Passage] = []
        with self._connect() as conn:
            seen: set[str] = set()
            for title, text in conn.execute("SELECT title, text FROM documents ORDER BY rowid"):
                if title is None or str(title) in seen:
                    continue
                seen.add(str(title))
                out.extend(Passage(str(title), i, t) for i, t in
                           enumerate(split_passages(str(text or ""), self.passage_words)))
        return out


# ---------------------------------------------------------------- loading


def _load_folder(path: Path, passage_words: int) -> KnowledgeSource:
    source = KnowledgeSource(str(path), "folder", passage_words)
    for f in _folder_files(path):
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise KnowledgeError(f"{f}: cannot read ({exc})") from None
        source._add(f.stem, text)
    if not source.titles():
        raise KnowledgeError(f"{path}: no .txt or .md documents in this folder")
    return source


def _folder_files(path: Path) -> list[Path]:
    return sorted(f for f in path.rglob("*") if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES
                  and not any(part.startswith(".") for part in f.relative_to(path).parts))


def _load_jsonl(path: Path, passage_words: int) -> KnowledgeSource:
    source = KnowledgeSource(str(path), "jsonl", passage_words)
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise KnowledgeError(f"{path}:{n}: not JSON ({exc})") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("title"), str):
                raise KnowledgeError(f"{path}:{n}: expected {{\"title\": ..., \"text\": ...}}")
            text = obj.get("text")
            if isinstance(text, list):
                text = [t for t in text if isinstance(t, str)]
            elif not isinstance(text, str):
                raise KnowledgeError(f"{path}:{n}: 'text' must be a string or a list of strings")
            source._add(obj["title"], text)
    if not source.titles():
        raise KnowledgeError(f"{path}: no documents")
    return source


def _signature(path: Path) -> tuple:
    st = path.stat()
    if path.is_dir():
        files = _folder_files(path)
        stats = [f.stat() for f in files]
        return ("dir", len(files), max((s.st_mtime_ns for s in stats), default=0), sum(s.st_size for s in stats),
                hash(tuple(str(f) for f in files)))
    return ("file", st.st_mtime_ns, st.st_size)


_CACHE: dict[tuple, KnowledgeSource] = {}
_CACHE_LOCK = threading.Lock()
_TEXT_CACHE: OrderedDict[tuple, KnowledgeSource] = OrderedDict()
_TEXT_CACHE_SIZE = 64
_BUILD_LOCKS: dict[tuple, threading.Lock] = {}


def open_source(path: str | os.PathLike, passage_words: int = DEFAULT_PASSAGE_WORDS) -> KnowledgeSource:
    """The knowledge source at `path` (folder, .jsonl or SQLite), loaded once per process."""
    p = Path(path).expanduser()
    if not p.exists():
        raise KnowledgeError(f"knowledge source not found: {p}")
    p = p.resolve()
    try:
        key = (str(p), _signature(p), passage_words)
    except OSError as exc:
        raise KnowledgeError(f"{p}: {exc}") from None
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
        build_lock = _BUILD_LOCKS.setdefault(key, threading.Lock())
    with build_lock:  # concurrent rows wait for the first load instead of repeating it
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
            if hit is not None:
                return hit
        if p.is_dir():
            with activity(f"Reading the knowledge source {p.name}"):
                source = _load_folder(p, passage_words)
        elif p.suffix.lower() in (".jsonl", ".ndjson"):
            with activity(f"Reading the knowledge source {p.name}"):
                source = _load_jsonl(p, passage_words)
        elif p.suffix.lower() in SQLITE_SUFFIXES or _is_sqlite(p):
            source = _SqliteSource(p, passage_words)
        else:
            raise KnowledgeError(f"{p}: a knowledge source is a folder of .txt/.md files, a .jsonl file of "
                                 "{title, text} lines, or a SQLite database with a documents(title, text) table")
        with _CACHE_LOCK:
            for old in [k for k in _CACHE if k[0] == key[0]]:  # an older version of the same path
                del _CACHE[old]
            _CACHE[key] = source
            _BUILD_LOCKS.pop(key, None)
        return source


def _is_sqlite(p: Path) -> bool:
    try:
        with p.open("rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def text_source(documents: Iterable[tuple[str, str]], passage_words: int = DEFAULT_PASSAGE_WORDS,
                name: str = "text") -> KnowledgeSource:
    """In-memory documents (the reference value or the context var), cached by content."""
    docs = list(documents)
    digest = hashlib.sha256(json.dumps(docs, ensure_ascii=False).encode("utf-8")).hexdigest()
    key = (digest, passage_words, name)
    with _CACHE_LOCK:
        hit = _TEXT_CACHE.get(key)
        if hit is not None:
            _TEXT_CACHE.move_to_end(key)
            return hit
    source = KnowledgeSource(name, "text", passage_words)
    for title, text in docs:
        source._add(title, text)
    with _CACHE_LOCK:
        _TEXT_CACHE[key] = source
        while len(_TEXT_CACHE) > _TEXT_CACHE_SIZE:
            _TEXT_CACHE.popitem(last=False)
    return source


def passage_source(texts: list[str], name: str = "passages") -> KnowledgeSource:
    """Ready-made passages (a RAG answer's retrieved ones), each text one passage, kept whole: they were
    cut by the retriever that returned them. Not cached: they are the row's own."""
    source = KnowledgeSource(name, "text")
    for i, text in enumerate(texts):
        title = f"passage {i + 1}"
        source._add(title, text)
        source._passages[title] = [Passage(title, 0, text)]
    return source


# ---------------------------------------------------------------- the `knowledge` search backend

from factcli.providers.search.base import SearchBackend, SearchConfigError, register_backend, result  # noqa: E402


@register_backend("knowledge")
class KnowledgeSearch(SearchBackend):
    """`config.search: {provider: knowledge, knowledge: <folder | .jsonl | SQLite>}`: a query is answered
    with the top passages of the whole source by BM25, each result titled by its document and addressed
    `knowledge:<title>#<passage>`. Offline and free; not cached, since the source may change between runs
    and retrieval costs milliseconds."""

    cacheable = False
    max_results = 100

    def check(self) -> None:
        ref = self.config.get("knowledge")
        if not isinstance(ref, str) or not ref.strip():
            raise SearchConfigError("config.search.knowledge is required for the knowledge backend: a folder of "
                                    ".txt/.md files, a .jsonl of {title, text} lines or a SQLite documents table")
        words = self.config.get("passage_words", DEFAULT_PASSAGE_WORDS)
        if isinstance(words, bool) or not isinstance(words, int) or words < 1:
            raise SearchConfigError(f"config.search.passage_words must be a whole number ≥ 1, got {words!r}")

    def cache_identity(self) -> dict:
        return {"id": self.id, "knowledge": str(self.path())}

    def path(self) -> Path:
        path = Path(str(self.config.get("knowledge")).removeprefix("file://")).expanduser()
        return path if path.is_absolute() else self.base_dir / path

    def open(self) -> KnowledgeSource:
        """The source, loaded once per process (KnowledgeError when it cannot be)."""
        return open_source(self.path(), int(self.config.get("passage_words", DEFAULT_PASSAGE_WORDS)))

    def preflight(self) -> list[str]:
        try:
            self.open()
        except KnowledgeError as exc:
            return [f"config.search.knowledge: {exc}"]
        return []

    async def search(self, query: str, results: int) -> list[dict]:
        import asyncio

        from factcli.providers.base import FATAL, ProviderCallError

        try:
            source = await asyncio.to_thread(self.open)
        except KnowledgeError as exc:
            raise ProviderCallError(f"knowledge search: {exc}", FATAL) from None
        passages = await asyncio.to_thread(source.retrieve, query, results)
        return [result(p.title, f"knowledge:{p.id}", p.text) for p in passages]
