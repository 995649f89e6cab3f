"""Text as the claim-level methods and the knowledge sources read it: sentences, passages, tokens, and
BM25 ranking over passages. Pure functions of text (no I/O, nothing downloaded at run time), shared by
`methods/` (safe, citations and factscore split responses into sentences; factscore ranks a knowledge
source's passages) and `providers/search/knowledge.py` (the knowledge sources and the offline search
backend), so it sits below both.

Passages: a document is split into passages of at most `max_words` words (default 256): sentences are
packed greedily, and a sentence longer than the limit is cut into pieces of that size; passages never
cross a FActScore separator. Splitting is one linear pass over the text.

Ranking is BM25 (the `bm25s` library, Lucene's variant, with a local regex tokenizer and an English
stop-word list). Ties keep passage order, so results are deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from factcli.activity import activity

DEFAULT_PASSAGE_WORDS = 256
FACTSCORE_SEPARATOR = "####SPECIAL####SEPARATOR####"


@dataclass(frozen=True)
class Passage:
    title: str
    index: int  # position within its document, from 0
    text: str

    @property
    def id(self) -> str:
        return f"{self.title}#{self.index + 1}"

    @property
    def words(self) -> int:
        return len(self.text.split())


# ---------------------------------------------------------------- sentences

# Abbreviations after which a period does not end a sentence (lower-cased, without the period).
_ABBREVIATIONS = frozenset("""
mr mrs ms dr prof st jr sr sen rep gov gen col lt sgt capt cmdr adm maj rev fr hon pres vs etc
e.g i.e cf al approx dept univ inc ltd co corp bros no nos vol vols pp ed eds fig mt ft
jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k u.n d.c ph.d b.a m.a b.sc m.sc a.m p.m
""".split())
_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]*\s+")
_NEXT_STARTS = re.compile(r"[\"'“‘(\[]*[A-Z0-9À-ÖØ-Þ]")
_LIST_MARKER = re.compile(r"^\s*(?:[-*•+]\s+|\d{1,3}[.)]\s+|#{1,6}\s+|>\s*)")


def _ends_with_abbreviation(chunk: str) -> bool:
    """Does the text before a '.' end in an abbreviation or an initial ("J." in "J. K. Rowling")?"""
    m = re.search(r"(\S+)$", chunk)
    if not m:
        return False
    word = m.group(1).lstrip("\"'“‘([")
    if len(word) == 1 and word.isalpha():
        return True  # an initial
    return word.lower() in _ABBREVIATIONS


def split_sentences(text: str) -> list[str]:
    """Sentences of a paragraph, without any tokenizer download.

    A boundary is end punctuation, optional closing quotes/brackets and whitespace, followed by a
    capital letter or a digit, and not after an abbreviation or an initial. Then FActScore's fixes
    (factuality-methods.md §3.2): a one-word "sentence" joins its neighbour.
    """
    text = text.strip()
    if not text:
        return []
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        end = m.end()
        if end >= len(text) or not _NEXT_STARTS.match(text, end):
            continue  # a lower-case continuation is not a new sentence
        if m.group(0).strip() == "." and _ends_with_abbreviation(text[start:m.start()]):
            continue
        out.append(text[start:m.start() + len(m.group(0).rstrip())].strip())
        start = end
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    merged: list[str] = []
    for s in out:
        if merged and len(s.split()) <= 1:
            merged[-1] = f"{merged[-1]} {s}"
        elif merged and len(merged[-1].split()) <= 1:
            merged[-1] = f"{merged[-1]} {s}"
        else:
            merged.append(s)
    return merged


def split_paragraph_sentences(text: str, strip_markers: bool = True) -> list[str]:
    """Sentences of a multi-line text: lines are paragraphs (FActScore splits on newlines first);
    list markers and markdown heading marks are dropped."""
    sentences: list[str] = []
    for line in text.splitlines():
        if strip_markers:
            line = _LIST_MARKER.sub("", line, count=1)
        if line.strip():
            sentences.extend(split_sentences(line))
    return sentences


# ---------------------------------------------------------------- passages


def split_passages(text: str | list[str], max_words: int = DEFAULT_PASSAGE_WORDS) -> list[str]:
    """A document's passages of at most `max_words` words, built in one linear pass."""
    if max_words < 1:
        raise ValueError("passage size must be at least one word")
    parts = text if isinstance(text, list) else [text]
    segments: list[list[str]] = []  # hard boundaries: FActScore's separator
    current: list[str] = []
    for part in parts:
        if not isinstance(part, str):
            continue
        pieces = part.split(FACTSCORE_SEPARATOR)
        for i, piece in enumerate(pieces):
            if i > 0:
                segments.append(current)
                current = []
            current.append(piece)
    segments.append(current)
    passages: list[str] = []
    for segment in segments:
        words_in: list[str] = []
        for paragraph in segment:
            for sentence in split_paragraph_sentences(paragraph, strip_markers=False):
                words = sentence.split()
                if len(words_in) + len(words) > max_words and words_in:
                    passages.append(" ".join(words_in))
                    words_in = []
                while len(words) > max_words:  # a sentence longer than a passage
                    passages.append(" ".join(words[:max_words]))
                    words = words[max_words:]
                words_in.extend(words)
        if words_in:
            passages.append(" ".join(words_in))
    return passages


# ---------------------------------------------------------------- BM25

_TOKEN = re.compile(r"\w+", re.UNICODE)


# Lucene's English stop words (the list bm25s uses), plus pronouns and auxiliaries that carry nothing
# for retrieval. Kept here so that importing factcli does not import bm25s (about a second).
STOPWORDS = frozenset("""
a an and are as at be but by for if in into is it no not of on or such that the their then there these
they this to was will with s t has had have he she his her its who which from also been were
""".split())


_NORMALIZED: dict[str, str] = {}  # token -> normalized form ("" for a stop word); bounded below


def _normalize(tok: str) -> str:
    if tok in STOPWORDS or (len(tok) == 1 and not tok.isdigit()):
        return ""
    if len(tok) > 3 and tok.endswith("s") and not tok.endswith("ss") and not tok.isdigit():
        return tok[:-1]
    return tok


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without stop words; a plural or possessive 's' is dropped."""
    cache = _NORMALIZED
    out = []
    for tok in _TOKEN.findall(text.lower()):
        norm = cache.get(tok)
        if norm is None:
            norm = _normalize(tok)
            if len(cache) < 1_000_000:
                cache[tok] = norm
        if norm:
            out.append(norm)
    return out


class PassageIndex:
    """BM25 over a list of passages (bm25s, Lucene's variant)."""

    def __init__(self, passages: list[Passage]):
        self.passages = passages
        self.model = None
        self.vocab: dict = {}
        if passages:
            with activity(f"Building a search index over {len(passages):,} passages"):
                self._build(passages)

    def _build(self, passages: list[Passage]) -> None:
        import bm25s

        corpus = [tokenize(f"{p.title} {p.text}") for p in passages]
        if not any(corpus):
            corpus = [doc or [""] for doc in corpus]
        self.model = bm25s.BM25(method="lucene")
        self.model.index(corpus, show_progress=False)
        self.vocab = self.model.vocab_dict

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        import numpy as np

        if not self.passages or k < 1:
            return []
        tokens = [t for t in tokenize(query) if t in self.vocab]
        k = min(k, len(self.passages))
        if not tokens:
            return [(p, 0.0) for p in self.passages[:k]]
        scores = np.asarray(self.model.get_scores(tokens), dtype=float)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(self.passages[i], float(scores[i])) for i in order]
