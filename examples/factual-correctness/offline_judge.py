"""A stand-in judge for offline runs of factual-correctness (not a real NLI model).

Decomposition: one claim per sentence. Verification: a claim is SUPPORTED when every content
word of it occurs in the premise, CONTRADICTED when it shares its subject with a premise sentence
but a number differs, NEUTRAL otherwise. Good enough to show the pipeline; use a real model
(--grader) to measure anything.
"""

import json
import re

STOP = {"the", "a", "an", "of", "is", "was", "in", "and", "to", "by", "on", "at", "it", "its"}


def _words(text):
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP}


def _sentences(text):
    return [s.strip().rstrip(".") for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()]


def _between(text, start, end):
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def call_api(prompt, options, context):
    messages = json.loads(prompt)
    text = messages[-1]["content"]
    if "<text>" in text:
        return {"output": json.dumps({"claims": _sentences(_between(text, "<text>", "</text>"))})}
    premise = _between(text, "<premise>", "</premise>")
    claims = [line.split(". ", 1)[1] for line in _between(text, "<claims>", "</claims>").splitlines()]
    verdicts = []
    for claim in claims:
        words = _words(claim)
        if words <= _words(premise):
            verdict, reason = "SUPPORTED", "every content word appears in the premise"
        elif any(len(words & _words(s)) >= 2 and set(re.findall(r"\d+", claim)) != set(re.findall(r"\d+", s))
                 for s in _sentences(premise)):
            verdict, reason = "CONTRADICTED", "the premise gives a different number for the same subject"
        else:
            verdict, reason = "NEUTRAL", "the premise does not mention this"
        verdicts.append({"claim": claim, "verdict": verdict, "reason": reason})
    return {"output": json.dumps({"verdicts": verdicts})}
