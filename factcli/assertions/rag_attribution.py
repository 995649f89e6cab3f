"""Which statement of a RAG assertion failed, and on which passage each one rests (issue 44).

context-faithfulness and context-recall keep, beside their score, one item per statement (or per
sentence of the reference) under `metadata.claims`, as the claim-level methods do, so `show`, the web
cell page and the HTML report list them: `{text, verdict, supported, reason, evidence, evidenceId}`.

The verdict and the reason are the judge's: from its structured reply when it fitted the step's
schema, else read from its words (the reason is the explanation before each `Verdict:`, the text
between a sentence and its `[Attributed]` tag). The judge names no passage, so `evidence` is the
passage of the context that shares the most words with a supported statement (`evidenceId`:
`passage N`, its 1-based place in the context's list), and none for a statement the context does
not support.
"""

from __future__ import annotations

import re

_VERDICT = re.compile(r"(?i)\bverdict:\s*(yes|no)\b\.?")
_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


def closest_passage(statement: str, context: str | list[str]) -> tuple[int, str] | None:
    """(1-based place, passage) of the context's passage sharing the most words with `statement`;
    None when none shares one. A context given as one text is split into its lines."""
    passages = context if isinstance(context, list) else [p for p in context.splitlines() if p.strip()]
    words = _words(statement)
    best, best_i = 0, -1
    for i, p in enumerate(passages):
        shared = len(words & _words(p))
        if shared > best:
            best, best_i = shared, i
    return (best_i + 1, passages[best_i]) if best_i >= 0 else None


def _item(text: str, supported: bool, verdict: str, reason: str, context) -> dict:
    found = closest_passage(text, context) if supported else None
    return {"text": text, "verdict": verdict, "supported": supported, "reason": reason.strip(),
            "evidence": found[1] if found else None, "evidenceId": f"passage {found[0]}" if found else None}


def faithfulness_claims(statements: list[str], parsed: dict | None, words: str, context) -> list[dict]:
    """One item per statement: the judge's Yes/No and its reason."""
    verdicts: list[tuple[str, str]] = []
    if parsed is not None:
        verdicts = [(v["verdict"], v["reason"]) for v in parsed.get("verdicts") or []]
    else:
        pieces = _VERDICT.split(words or "")
        for i in range(1, len(pieces), 2):
            before = [line.strip() for line in pieces[i - 1].strip().splitlines() if line.strip()]
            verdicts.append((pieces[i].capitalize(), before[-1] if before else ""))
    out = []
    for i, statement in enumerate(statements):
        verdict, reason = verdicts[i] if i < len(verdicts) else ("No", "the judge gave no verdict")
        out.append(_item(statement, verdict.lower() == "yes", verdict, reason, context))
    return out


def recall_claims(attributions: list[dict], parsed: dict | None, words: str, context) -> list[dict]:
    """One item per sentence of the reference answer: attributed to the context or not, and why."""
    reasons: list[str] = []
    if parsed is not None:
        reasons = [s["reason"] for s in parsed.get("sentences") or []]
    else:  # "1. <sentence> <reason> So [Attributed]": what is left of the line after its sentence
        bodies = [re.sub(r"(?i)\s*so\s*\[(not )?attributed\].*$", "", re.sub(r"^\s*\d+\.\s*", "", line)).strip()
                  for line in (words or "").splitlines() if "attributed]" in line.lower()]
        for a, body in zip(attributions, bodies):
            sentence = a["sentence"].rstrip(".")
            reasons.append(body[len(sentence):].lstrip(". ") if body.startswith(sentence) else body)
    out = []
    for i, a in enumerate(attributions):
        verdict = "Attributed" if a["attributed"] else "Not Attributed"
        out.append(_item(a["sentence"], a["attributed"], verdict, reasons[i] if i < len(reasons) else "", context))
    return out
