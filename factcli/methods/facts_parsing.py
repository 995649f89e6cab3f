"""How FACTS Grounding reads its judges' replies and checks them against the response: the parsers of
the eligibility reply and of the four grounding templates (`json`, `implicit_span_level`, `span_level`,
`response_level`, and the final-answer rule they share), the sentence splitter that cuts a response into
`span_level` spans, and the check that the sentences a judge labelled come from the response and cover
enough of it. It is plain text work, no judge calls: a reply of the wrong shape is a JudgeError that keeps
the raw reply, never a guess. The formats are described in `facts_grounding`'s docstring; that module runs
the judges and scores what these functions return.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from factcli.methods.claims import JudgeError
from factcli.scoring.content import COPIED, Source, normalize
from factcli.scoring.replies import Choice, ListOf, Maybe, Obj, Reply, ReplyError, Text

MAJOR = "Major Issue(s)"
JSON_LABELS = {"supported": "SUPPORTED", "unsupported": "UNSUPPORTED", "contradictory": "CONTRADICTORY",
               "contradicted": "CONTRADICTORY", "no_rad": "NO_RAD"}


# ---------------------------------------------------------------- text helpers

_SPACES = re.compile(r"\s+")
_WORD = re.compile(r"\w+")


_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "inc", "ltd", "co", "corp",
    "no", "nos", "fig", "figs", "al", "approx", "dept", "est", "vol", "pp", "ch", "sec", "art", "gen", "gov",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "a.m", "p.m", "u.s",
    "u.k", "u.n", "e.u", "cf", "ca", "op", "ed", "eds", "rev", "mt", "ft", "lt", "col", "capt", "sgt",
}
_BOUNDARY = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*\s+")
_INITIALS = re.compile(r"(?:[a-z]\.)*[a-z]")
_LIST_MARK = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.)])\s+")


def split_sentences(text: str) -> list[str]:
    """Sentences of a response, in linear time and without downloaded data: every non-empty line
    is split at sentence ends (. ! ? followed by space and an upper-case letter, digit, quote or
    bracket), except after common abbreviations and initials; list markers are kept."""
    spans: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        start = 0
        for m in _BOUNDARY.finditer(line):
            nxt = line[m.end():m.end() + 1]
            if not nxt or not (nxt.isupper() or nxt.isdigit() or nxt in "\"'\u201c\u2018([*"):
                continue
            if line[m.start()] == ".":
                ws = max(line.rfind(" ", start, m.start()), start - 1)
                word = line[ws + 1:m.start()].lstrip("(\"'\u201c\u2018[").lower()
                if word in _ABBREVIATIONS or _INITIALS.fullmatch(word) or (word.isdigit() and ws < start):
                    continue  # an abbreviation, initials, or a list number at the start ("1. ")
            piece = line[start:m.end()].strip()
            if piece:
                spans.append(piece)
            start = m.end()
        tail = line[start:].strip()
        if tail:
            spans.append(tail)
    return spans


def check_sentences(judge: str, sentences: list[str], response: str, min_coverage: float, step: str) -> float:
    """Judged sentences must come from the response (scoring/content's rule for a copied sentence) and cover
    enough of it; returns the coverage."""
    source = Source(response)
    response_words = _WORD.findall(normalize(response))
    judged: set[str] = set()
    for i, sentence in enumerate(sentences):
        words = _WORD.findall(normalize(_LIST_MARK.sub("", sentence)))
        judged.update(words)
        if words and not source.holds(sentence, COPIED):
            raise JudgeError(f"{step}: sentence {i + 1} ({sentence[:80]!r}) is not from the response")
    if not response_words:
        return 1.0
    coverage = sum(1 for w in response_words if w in judged) / len(response_words)
    if coverage < min_coverage:
        raise JudgeError(f"{step}: the judged sentences cover {coverage:.0%} of the response's words "
                         f"(config.minCoverage {min_coverage:g})")
    return coverage


# ---------------------------------------------------------------- parsing replies

_ELIGIBILITY_LABELS = {
    "no issues": "No Issues", "no issue": "No Issues", "no issue(s)": "No Issues",
    "minor issue(s)": "Minor Issue(s)", "minor issues": "Minor Issue(s)", "minor issue": "Minor Issue(s)",
    "major issue(s)": MAJOR, "major issues": MAJOR, "major issue": MAJOR,
}
_FENCE = re.compile(r"```json(.*?)(?:```|\Z)", re.S | re.I)
_IF_VALUE = re.compile(r"[\"']?Instruction Following[\"']?\s*:\s*[\"']([^\"'\n]*)[\"']", re.I)


def parse_eligibility(text: str) -> str:
    """The verdict of the eligibility rubric: the ```json block(s) first (newlines read as spaces),
    else `"Instruction Following": "..."` anywhere. Missing, unknown or conflicting: JudgeError."""
    values: list[str] = []
    for m in _FENCE.finditer(text):
        block = m.group(1).replace("\n", " ").strip()
        try:
            obj = json.loads(block)
        except ValueError:
            found = _IF_VALUE.search(block)
            obj = {"Instruction Following": found.group(1)} if found else None
        if isinstance(obj, dict):
            key = next((k for k in obj if str(k).strip().lower() == "instruction following"), None)
            if key is not None:
                values.append(str(obj[key]))
    if not values:
        values = [m.group(1) for m in _IF_VALUE.finditer(text)]
    if not values:
        raise JudgeError("eligibility: no {\"Instruction Following\": ...} verdict in the judge's reply", text)
    labels = set()
    for v in values:
        label = _ELIGIBILITY_LABELS.get(_SPACES.sub(" ", v.strip().lower()))
        if label is None:
            raise JudgeError(f"eligibility: unknown verdict {v!r} (expected No Issues, Minor Issue(s) or "
                             "Major Issue(s))", text)
        labels.add(label)
    if len(labels) > 1:
        raise JudgeError(f"eligibility: conflicting verdicts {sorted(labels)}", text)
    return labels.pop()


def _json_chunks(body: str) -> Iterable[str]:
    start = 0
    for m in re.finditer(r"\}[ \t]*\r?\n", body):
        yield body[start:m.start() + 1]
        start = m.end()
    yield body[start:]


def parse_json_labels(text: str) -> list[dict]:
    """The `json` template's reply: one {"sentence", "label", "rationale", "excerpt"} per sentence."""
    fence = _FENCE.search(text)
    body = (fence.group(1) if fence else text).strip()
    objects: list[Any] = []
    try:  # a judge that answers with one JSON array (or one object) instead of JSON lines
        whole = json.loads(body)
        objects = whole if isinstance(whole, list) else [whole]
    except ValueError:
        decoder = json.JSONDecoder()
        for chunk in _json_chunks(body):
            chunk = chunk.replace("\r", " ").replace("\n", " ").replace("\\'", "'")
            pos = chunk.find("{")  # text without an object is prose, skipped as the reference does
            while pos >= 0:
                try:
                    obj, end = decoder.raw_decode(chunk, pos)
                except ValueError:
                    raise JudgeError(f"json template: object {len(objects) + 1} is not valid JSON: "
                                     f"{chunk[pos:pos + 120]!r}", text) from None
                objects.append(obj)
                pos = chunk.find("{", end)
    if not objects:
        raise JudgeError("json template: no JSON object in the judge's reply", text)
    out = []
    for i, obj in enumerate(objects):
        if not isinstance(obj, dict):
            raise JudgeError(f"json template: item {i + 1} is not an object", text)
        raw_label = obj.get("label")
        label = JSON_LABELS.get(re.sub(r"[\s-]+", "_", str(raw_label).strip().strip("'\"").lower())) \
            if isinstance(raw_label, str) else None
        if label is None:
            raise JudgeError(f"json template: sentence {i + 1} has label {raw_label!r}, expected supported, "
                             "unsupported, contradictory or no_rad", text)
        sentence, rationale, excerpt = obj.get("sentence"), obj.get("rationale"), obj.get("excerpt")
        if not isinstance(sentence, str) or not sentence.strip():
            raise JudgeError(f"json template: item {i + 1} has no sentence", text)
        out.append({"text": sentence.strip(), "verdict": label,
                    "reason": rationale if isinstance(rationale, str) else "",
                    "evidence": excerpt if isinstance(excerpt, str) and excerpt.strip() else None})
    return out


_FINAL = re.compile(r"final\s+answer\s*:", re.I)
_WORD_VERDICT = re.compile(r"\b(in)?accurate\b", re.I)


def read_final_answer(text: str, step: str, require_final: bool = False) -> bool:
    """True = accurate. The text after the last `Final Answer:`, lower-cased: "inaccurate" or
    "false" -> inaccurate, else "accurate" or "true" -> accurate (factuality-methods.md §4.3).
    Without `Final Answer:` (unless required), the last line naming exactly one of
    Accurate/Inaccurate decides."""
    clean = text.replace("*", "")
    finals = list(_FINAL.finditer(clean))
    if finals:
        tail = clean[finals[-1].end():].lower()
        if "inaccurate" in tail or "false" in tail:
            return False
        if "accurate" in tail or "true" in tail:
            return True
        raise JudgeError(f"{step}: the final answer is neither Accurate nor Inaccurate", text)
    for line in ([] if require_final else reversed(clean.splitlines())):
        kinds = {m.group(1) is not None for m in _WORD_VERDICT.finditer(line)}
        if len(kinds) == 1:
            return not kinds.pop()
        if len(kinds) == 2:
            break
    raise JudgeError(f"{step}: no 'Final Answer: Accurate/Inaccurate' in the judge's reply", text)


_SENTENCE_LINE = re.compile(r"^\s*(?:[-#>]\s*)*sentence\s+(\d+)(?:\s+(label|evidence|reason|rationale))?\s*:\s*(.*)$",
                            re.I)


def parse_implicit_span_level(text: str) -> tuple[bool, list[dict]]:
    """Sentence lines and the final answer; labels must be Accurate/Inaccurate, numbered 1..n,
    and agree with the final answer."""
    rows: dict[int, dict] = {}
    for line in text.replace("*", "").splitlines():
        m = _SENTENCE_LINE.match(line)
        if not m:
            continue
        k, kind, value = int(m.group(1)), (m.group(2) or "text").lower(), m.group(3).strip()
        if kind == "rationale":
            kind = "reason"
        row = rows.setdefault(k, {})
        if kind in row:
            raise JudgeError(f"implicit_span_level: sentence {k} has two {kind} lines", text)
        row[kind] = value
    accurate = read_final_answer(text, "implicit_span_level", require_final=True)
    if not rows:
        return accurate, []
    if sorted(rows) != list(range(1, len(rows) + 1)):
        raise JudgeError(f"implicit_span_level: sentences are numbered {sorted(rows)[:10]}, expected 1..{len(rows)}",
                         text)
    out = []
    for k in range(1, len(rows) + 1):
        row = rows[k]
        if "text" not in row or "label" not in row:
            raise JudgeError(f"implicit_span_level: sentence {k} needs both a 'Sentence {k}:' and a "
                             f"'Sentence {k} label:' line", text)
        label = row["label"].strip().strip(".").lower()
        if label not in ("accurate", "inaccurate"):
            raise JudgeError(f"implicit_span_level: sentence {k} label is {row['label']!r}, expected Accurate or "
                             "Inaccurate", text)
        evidence = row.get("evidence")
        if evidence is not None and evidence.strip().strip(".").lower() in ("", "none", "n/a", "null"):
            evidence = None
        out.append({"text": row["text"], "verdict": label.upper(), "reason": row.get("reason", ""),
                    "evidence": evidence})
    all_accurate = all(c["verdict"] == "ACCURATE" for c in out)
    if all_accurate != accurate:
        raise JudgeError("implicit_span_level: the final answer contradicts the sentence labels "
                         f"(final {'Accurate' if accurate else 'Inaccurate'}, "
                         f"{sum(c['verdict'] == 'INACCURATE' for c in out)} inaccurate sentence(s))", text)
    return accurate, out


_FIELD = re.compile(r"^\s*(evidence|reasoning|reason)\s*:\s*(.*)$", re.I | re.M)


def parse_span_level(text: str, step: str) -> tuple[bool, str, str | None]:
    """(accurate, reasoning, evidence) of one span's reply."""
    accurate = read_final_answer(text, step)
    fields = {m.group(1).lower(): m.group(2).strip() for m in _FIELD.finditer(text.replace("*", ""))}
    evidence = fields.get("evidence")
    if evidence is not None and evidence.strip().strip(".").lower() in ("", "none", "n/a", "null"):
        evidence = None
    return accurate, fields.get("reasoning") or fields.get("reason") or "", evidence


# ---------------------------------------------------------------- the replies asked for

# Each reply is constrained to a schema (scoring/replies.py) and written back into the text form the
# parsers above read, so a judge that could only answer in plain text is read by the same code. Each
# step's `protocol` is that parser: a server that ignores the schema and answers in the prompt's own
# form (JSON lines, `Final Answer:`, a ```json verdict without its reasoning) is read as the paper's
# code reads it.


def _protocol(parse):
    def read(text: str):
        try:
            return parse(text)
        except JudgeError as exc:
            raise ReplyError(str(exc)) from None
    return read


def _response(text: str) -> str:
    if not text.strip():
        raise ReplyError("baseline: the reply is empty")
    return text


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _sentence_lines(v: dict) -> str:
    lines = []
    for k, x in enumerate(v["sentences"], 1):
        lines += [f"Sentence {k}: {_one_line(x['sentence'])}", f"Sentence {k} label: {x['label']}",
                  f"Sentence {k} reason: {_one_line(x['reason'])}",
                  f"Sentence {k} evidence: {_one_line(x['evidence']) or 'None'}"]
    return "\n".join(lines + [f"Final Answer: {v['final_answer']}"])


_VERDICT = Choice("Accurate", "Inaccurate")
BASELINE_REPLY = Reply("baseline_response", Obj(response=Text()), 2048, types=("facts-grounding",),
                       as_text=lambda v: v["response"], protocol=_response)  # a response: its whole text
ELIGIBILITY_REPLY = Reply("eligibility", Obj(reasoning=Text(), **{"Instruction Following": Choice(
    "No Issues", "Minor Issue(s)", MAJOR)}), 1024, types=("facts-grounding",),
    as_text=lambda v: f"{v['reasoning']}\n```json\n"
                      f"{json.dumps({'Instruction Following': v['Instruction Following']})}\n```",
    protocol=_protocol(parse_eligibility))
GROUNDING_REPLIES = {
    "json": Reply("grounding_labels", Obj(sentences=ListOf(Obj(
        sentence=Text(), label=Choice("supported", "unsupported", "contradictory", "no_rad"), rationale=Text(),
        excerpt=Maybe(Text())), 1)), 2048, types=("facts-grounding",),  # the prompt asks for null: no excerpt
        as_text=lambda v: json.dumps(v["sentences"], ensure_ascii=False), protocol=_protocol(parse_json_labels)),
    "implicit_span_level": Reply("grounding_sentences", Obj(sentences=ListOf(Obj(
        sentence=Text(), label=_VERDICT, reason=Text(), evidence=Text())), final_answer=_VERDICT), 2048,
        types=("facts-grounding",), as_text=_sentence_lines, protocol=_protocol(parse_implicit_span_level)),
    "span_level": Reply("grounding_span", Obj(reasoning=Text(), evidence=Text(), final_answer=_VERDICT), 512,
                        types=("facts-grounding",),
                        as_text=lambda v: f"Reasoning: {_one_line(v['reasoning'])}\n"
                                          f"Evidence: {_one_line(v['evidence']) or 'None'}\n"
                                          f"Final Answer: {v['final_answer']}",
                        protocol=_protocol(lambda t: parse_span_level(t, "span_level"))),
    "response_level": Reply("grounding_response", Obj(reasoning=Text(), final_answer=_VERDICT), 1024,
                            types=("facts-grounding",),
                            as_text=lambda v: f"{v['reasoning'].strip()}\nFinal Answer: {v['final_answer']}",
                            protocol=_protocol(lambda t: read_final_answer(t, "response_level"))),
}
