"""What a judge's reply must contain to count as a judgment of what it was sent (issue 52).

A reply can fit its step's schema and still judge nothing: a small judge that copies the prompt's own
template (every claim `<claim>`, every reason `<one sentence>`), lists sentences that are not in the
context, or echoes claims it was not sent. A step declares, beside its reply (scoring/replies.Reply's
`content`), which of the checks below its reply must pass; the grader call (scoring/grading.complete)
runs them with `Sent`, what the step sent, and a reply that fails one is a grading error with the
check's reason, never kept in the cache. Every call given a Sent (every JSON step of the claim-level
methods, through claims.ask_json, and the RAG types' listing and verdict steps) is checked for the
prompt's placeholders: no text of the reply may be one (`<claim>`, `<one sentence>`); and `listed` items
may not be a passage of the prompt's own words (its examples) that is not in the text they were about.

"Comes from" (`Source.holds`), the one rule for every step (FACTS Grounding's judged sentences too):
after normalising case, spacing, quotes, dashes and markdown markup, the text occurs word for word in
the source; or at least a share of its content words do (words of two or more letters, or numbers,
outside the stop-word list of stats/text.py, compared by their Porter stems, so that "founded" matches
"founding"; in Chinese, Japanese and Korean, each character is a word). The share is per kind of step:
- COPIED (0.6): a sentence the step copies out (context-relevance's sentences, FACTS Grounding's
  judged sentences, a verdict's echo of its claim);
- RESTATED (0.5): a statement, claim or atomic fact the step writes (decomposition rewrites the text:
  pronouns replaced by their referent, a terse answer completed from the question), whose source is
  then the text and the question the model answered. A faithful paraphrase keeps most of its content
  words from them; a sentence about something else keeps few.
A text with no content words ("N/A", "It is.") comes from the source only word for word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from factcli.scoring.replies import ReplyError
from factcli.stats.porter_stemmer import porter_stem
from factcli.stats.text import STOPWORDS

COPIED = 0.6
RESTATED = 0.5

_MARKUP = re.compile(r"[*_`#>|]+")
_SPACES = re.compile(r"\s+")
_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'", "\u2013": "-", "\u2014": "-"})
# Chinese and Japanese are written without spaces (Korean syllables are matched alike): each character is a
# word, so that a paraphrase shares its characters rather than needing the whole run word for word
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(f"[{_CJK}]|[^\\W{_CJK}]+")
_LIST_MARK = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.)])\s+")
_PLACEHOLDER = re.compile(r"^<[^<>\n]{1,80}>$")
_STEMS: dict[str, str] = {}


def normalize(text: str) -> str:
    """Case, spacing, curly quotes and dashes, and markdown markup do not count when a judge's text is
    matched against what it was sent."""
    return _SPACES.sub(" ", _MARKUP.sub(" ", text.translate(_QUOTES).lower())).strip()


def content_words(text: str) -> list[str]:
    """The stems of the words that carry content: no stop words, no single letters (numbers kept)."""
    out = []
    for word in _TOKEN.findall(text.lower()):
        if word in STOPWORDS or (len(word) == 1 and word.isascii() and not word.isdigit()):
            continue
        stem = _STEMS.get(word)
        if stem is None:
            stem = porter_stem(word)
            if len(_STEMS) < 100_000:
                _STEMS[word] = stem
        out.append(stem)
    return out


def _bare(text: str) -> str:
    return normalize(_LIST_MARK.sub("", text)).rstrip(".!?;:, ")


def _within(needle: str, haystack: str) -> bool:
    """`needle` in `haystack` as whole words (a one-word claim "art" is not in "party")."""
    return bool(needle) and re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", haystack) is not None


class Source:
    """The text a reply's items must come from (several texts: the answer and the question it answers)."""

    def __init__(self, *texts: str):
        self.text = normalize("\n".join(t for t in texts if t))
        self.vocabulary = set(content_words(self.text))

    def share(self, text: str) -> float | None:
        """The share of `text`'s content words found in the source; None when it has none."""
        words = content_words(text)
        if not words:
            return None
        return sum(1 for w in words if w in self.vocabulary) / len(words)

    def verbatim(self, text: str) -> bool:
        return _within(_bare(text), self.text)

    def holds(self, text: str, share: float) -> bool:
        """Whether `text` comes from the source (the module's rule)."""
        if self.verbatim(text):
            return True
        found = self.share(text)
        return found is not None and found >= share


@dataclass(frozen=True)
class Sent:
    """What a step sent: `source` (the text its reply's items must come from, named `source_name` in
    reasons), `inputs` (every text filled into its prompt: what is left of the prompt are its own words,
    instructions and examples) and `items` (the claims a verdict list must echo, in order)."""

    source: Source
    source_name: str
    inputs: tuple[str, ...] = ()
    items: tuple[str, ...] = ()
    prompt: str = field(default="", repr=False)  # the prompt's own words, normalised (`about`)

    @classmethod
    def of(cls, source_name: str, *source: str, inputs: Any = (), items: Any = ()) -> "Sent":
        texts = [*source, *(v for v in _strings(inputs)), *items]
        return cls(Source(*source), source_name, tuple(dict.fromkeys(t for t in texts if t)), tuple(items))

    def with_inputs(self, variables: dict) -> "Sent":
        """This Sent with the prompt's variables among the texts filled into it."""
        return replace(self, inputs=tuple(dict.fromkeys([*self.inputs, *(t for t in _strings(variables) if t)])))

    def about(self, messages: list[dict]) -> "Sent":
        """This Sent with the prompt's own words: the rendered messages less every text filled into them."""
        own = "\n".join(c for m in messages for c in _strings(m.get("content")))
        for text in sorted(self.inputs, key=len, reverse=True):
            if len(text) > 2:
                own = own.replace(text, "\n")
        return replace(self, prompt=normalize(own))

    def check(self, step: str, value: dict, content: Callable[[dict, "Sent"], None] | None) -> None:
        """The placeholder check over every text of the reply, then the step's own; ReplyError with the
        reason."""
        for where, text in _texts(value, step):
            bare = text.strip()
            if _PLACEHOLDER.match(bare) and _within(normalize(bare), self.prompt):
                raise ReplyError(f"{where} is {bare!r}, the prompt's own placeholder: the judge copied the "
                                 "prompt's template instead of judging")
        if content is not None:
            content(value, self)

    def copied(self, text: str) -> bool:
        """A text of two or more words that is a passage of the prompt's own words (an example) and not of
        the source."""
        bare = _bare(text)
        return len(bare.split()) >= 2 and _within(bare, self.prompt) and not self.source.verbatim(text)


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _texts(value: Any, where: str):
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _texts(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _texts(v, f"{where}[{i}]")


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:79] + "…")


def listed(key: str, what: str, share: float, field_name: str | None = None) -> Callable[[dict, Sent], None]:
    """A content check: every text of the reply's list `key` (each a `what`: "sentence", "claim"; the
    entries' `field_name` for a list of objects) comes from what the step sent (at `share`: COPIED or
    RESTATED) and is not the prompt's own example."""

    def check(value: dict, sent: Sent) -> None:
        entries = value.get(key) or []
        if isinstance(entries, str):  # one text (a revised fact)
            entries = [entries]
        texts = [e.get(field_name) if isinstance(e, dict) else None for e in entries] if field_name else entries
        for i, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                continue
            if sent.copied(text):
                raise ReplyError(f"{what} {i + 1} ({_shown(text)}) is the prompt's own example, not from the "
                                 f"{sent.source_name}: the judge copied the prompt instead of judging")
            if not sent.source.holds(text, share):
                found = sent.source.share(text)
                part = ("it has no content words" if found is None else
                        f"{found:.0%} of its content words are there, at least {share:.0%} are needed")
                raise ReplyError(f"{what} {i + 1} ({_shown(text)}) is not from the {sent.source_name} "
                                 f"({part}): not a judgment of what the judge was sent")

    return check


def echoed(key: str, field_name: str, what: str) -> Callable[[dict, Sent], None]:
    """A content check: the `field_name` of each entry of the list `key` echoes the `what` it judges (the
    step's `items`, in order), word for word or with COPIED of its content words either way."""

    def check(value: dict, sent: Sent) -> None:
        entries = value.get(key) or []
        if len(entries) != len(sent.items):
            return  # the step's reader says how many verdicts it wants (claims.aligned_verdicts)
        for i, (entry, item) in enumerate(zip(entries, sent.items)):
            echo = entry.get(field_name) if isinstance(entry, dict) else None
            if not isinstance(echo, str):
                continue
            if _same(echo, item):
                continue
            other = next((j for j, o in enumerate(sent.items) if j != i and _bare(echo) == _bare(o)), None)
            if other is not None:
                raise ReplyError(f"verdict {i + 1} is about {what} {other + 1} ({_shown(sent.items[other])}), not "
                                 f"{what} {i + 1}: the verdicts are out of order")
            raise ReplyError(f"verdict {i + 1} is about {_shown(echo)}, not the {what} it was sent "
                             f"({_shown(item)}): its verdict cannot be told to be about that {what}")

    return check


def _same(echo: str, item: str) -> bool:
    """An echo of the item: word for word, or COPIED of the content words either way."""
    return _bare(echo) == _bare(item) or (Source(item).holds(echo, COPIED) and Source(echo).holds(item, COPIED))


def checks(*parts: Callable[[dict, Sent], None]) -> Callable[[dict, Sent], None]:
    """Several content checks, in order."""

    def check(value: dict, sent: Sent) -> None:
        for part in parts:
            part(value, sent)

    return check
