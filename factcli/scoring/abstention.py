"""When an answer declines to answer: FActScore's abstention rules (its abstain_detection.py), shared
by `factscore` (an abstaining response is not scored) and `factuality` with `config.abstain` (the row
counts as not attempted in the column's SimpleQA figures)."""

from __future__ import annotations

import re
from typing import Iterable

# FActScore's abstain_detection.py: phrases of a search-backed model that found nothing.
PERPLEXITY_PHRASES = (
    "I could not find any information",
    "The search results do not provide",
    "There is no information",
    "There are no search results",
    "there are no provided search results",
    "not provided in the search results",
    "is not mentioned in the provided search results",
    "There seems to be a mistake in the question",
    "Not sources found",
    "No sources found",
    "Try a more general question",
)
ABSTAIN_MODES = ("auto", "generic", "perplexity_ai", "none")
_CITATION = re.compile(r"\s*\[\d+\]\s*")


def _generic_abstains(text: str) -> str | None:
    if text.startswith("I'm sorry"):
        return "starts with \"I'm sorry\""
    if "provide more" in text:
        return "contains \"provide more\""
    return None


def _perplexity_abstains(text: str) -> str | None:
    """FActScore's rule: a "no information" phrase at the start, or in the first paragraph (no valid
    paragraph comes before the first invalid one)."""
    output = _CITATION.sub(" ", text).strip()
    lower = output.lower()
    for p in PERPLEXITY_PHRASES:
        if lower.startswith(p.lower()):
            return f"starts with \"{p}\""
    first = output.split("\n\n", 1)[0]
    for p in PERPLEXITY_PHRASES:
        if p.lower() in first.lower():
            return f"\"{p}\" before any other paragraph"
    return None if first.strip() else "empty response"


def detect_abstention(text: str, mode: str = "auto", phrases: Iterable[str] = ()) -> str | None:
    """The abstention rule that fires for a response, or None."""
    text = (text or "").replace("’", "'").strip()
    if not text:
        return "empty response"
    lower = text.lower()
    for phrase in phrases:
        if phrase and lower.startswith(str(phrase).replace("’", "'").lower()):
            return f"starts with {phrase!r}"
    if mode in ("auto", "generic"):
        why = _generic_abstains(text)
        if why:
            return why
    if mode in ("auto", "perplexity_ai"):
        return _perplexity_abstains(text)
    return None
