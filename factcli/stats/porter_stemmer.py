"""natural 8.x's PorterStemmer (the stemmer promptfoo's meteor matches words with), ported: its
measure() can be fractional, it treats "y" after a consonant as a vowel group, and step 2/3 try every
suffix rule against the unstemmed word. nltk's ORIGINAL and MARTIN variants each disagree with it on
hundreds of words, hence the port. Stems are computed on UTF-16 code units (JavaScript strings); they
are only compared for equality.
"""

from __future__ import annotations

import re

from factcli.templating.jsvalues import utf16_len, utf16_units


def _groups(token: str) -> str:
    t = re.sub(r"[^aeiouy]+y", "CV", token)
    t = re.sub(r"[aeiou]+", "V", t)
    return re.sub(r"[^V]+", "C", t)


def _chars(token: str) -> str:
    t = re.sub(r"[^aeiouy]y", "CV", token)
    t = re.sub(r"[aeiou]", "V", t)
    return re.sub(r"[^V]", "C", t)


def _measure(token: str | None) -> float:
    if not token:
        return -1
    g = re.sub(r"V\Z", "", re.sub(r"\AC", "", _groups(token)))
    return len(g) / 2


def _replace_suffix(token: str, suffix: str, replacement: str) -> str | None:
    """natural's attemptReplace with a string pattern: None when the token lacks the suffix."""
    if token.endswith(suffix):
        return token[: len(token) - len(suffix)] + replacement
    return None


def _replace_rules(token: str, rules: list[tuple[str, str]], min_measure: float | None) -> str:
    current = token
    for suffix, replacement in rules:
        if min_measure is None or _measure(_replace_suffix(token, suffix, "")) > min_measure:
            current = _replace_suffix(current, suffix, replacement) or current
    return current


def _step1a(token: str) -> str:
    if re.search(r"(ss|i)es\Z", token):
        return re.sub(r"(ss|i)es\Z", r"\1", token, count=1)
    if token[-1:] == "s" and token[-2:-1] != "s" and len(token) > 2:
        return token[:-1]
    return token


def _step1b(token: str) -> str:
    if token[-3:] == "eed":
        if _measure(token[:-3]) > 0:
            return token[:-3] + "ee"
        return token
    m = re.search(r"(ed|ing)\Z", token)
    if m is None:
        return token
    stripped = token[: m.start()]
    if not stripped:
        return token
    if "V" not in _groups(stripped):
        return token
    result = _replace_rules(stripped, [("at", "ate"), ("bl", "ble"), ("iz", "ize")], None)
    if result != stripped:
        return result
    if re.search(r"([^aeiou])\1\Z", stripped) and re.search(r"[^lsz]\Z", stripped):
        return re.sub(r"([^aeiou])\1\Z", r"\1", stripped, count=1)
    if (_measure(stripped) == 1 and _chars(stripped)[-3:] == "CVC"
            and re.search(r"[^wxy]\Z", stripped)):
        return stripped + "e"
    return stripped


def _step1c(token: str) -> str:
    groups = _groups(token)
    if token[-1:] == "y" and "V" in groups[: len(groups) - 1]:
        return token[:-1] + "i"
    return token


_STEP2 = [("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"),
          ("abli", "able"), ("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"),
          ("ousli", "ous"), ("ization", "ize"), ("ation", "ate"), ("ator", "ate"), ("alism", "al"),
          ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"), ("iviti", "ive"),
          ("biliti", "ble"), ("logi", "log")]
_STEP3 = [("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""),
          ("ness", "")]
_STEP4_A = re.compile(r"(.+?)(al|ance|ence|er|ic|able|ible|ant|ement|ment|ent|ou|ism|ate|iti|ous|ive|ize)\Z",
                      re.DOTALL)
_STEP4_B = re.compile(r"(.+?)(s|t)(ion)\Z", re.DOTALL)


def _step4(token: str) -> str:
    m = _STEP4_A.match(token)
    if m and _measure(m.group(1)) > 1:
        return m.group(1)
    m = _STEP4_B.match(token)
    if m and _measure(m.group(1) + m.group(2)) > 1:
        return m.group(1) + m.group(2)
    return token


def _step5a(token: str) -> str:
    m = _measure(re.sub(r"e\Z", "", token, count=1))
    chars = _chars(token)
    start = max(len(chars) - 4, 0)
    if m > 1 or (m == 1 and not (chars[start:start + 3] == "CVC" and re.search(r"[^wxy].\Z", token, re.DOTALL))):
        token = re.sub(r"e\Z", "", token, count=1)
    return token


def _step5b(token: str) -> str:
    if _measure(token) > 1:
        return re.sub(r"ll\Z", "l", token, count=1)
    return token


def porter_stem(word: str) -> str:
    """natural's PorterStemmer.stem (on JavaScript code units)."""
    units = word if utf16_len(word) == len(word) else "".join(map(chr, utf16_units(word)))
    if len(units) < 3:
        return units
    token = units.lower()
    token = _step1a(token)
    token = _step1b(token)
    token = _step1c(token)
    token = _replace_rules(token, _STEP2, 0)
    token = _replace_rules(token, _STEP3, 0)
    token = _step4(token)
    return _step5b(_step5a(token))
