"""A stand-in judge for offline runs of simpleqa and factuality (not a real model): word overlap
with the gold answer. Good enough to show the figures; use a real grader (--grader) to measure.

simpleqa: "C" (not attempted) when the answer declines, "A" when it holds most of the gold answer's
content words and not many others, else "B". factuality: category "A" in that case, else "D".
"""

import json
import re

STOP = {"the", "a", "an", "of", "is", "are", "was", "in", "and", "to", "by", "on", "at", "it", "its", "if",
        "be", "has", "have", "do", "does", "that", "this", "with", "for", "can", "may"}
DECLINES = ("i don't know", "i do not know", "i have no comment", "i'm not sure", "i cannot answer")


def _words(text):
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP}


def _agrees(answer, gold):
    """Most of the gold answer's content words, and not many of its own besides."""
    gold_words, words = _words(gold), _words(answer)
    if not gold_words or not words:
        return False
    return len(gold_words & words) / len(gold_words) >= 0.6 and len(words - gold_words) / len(words) <= 0.4


def _between(text, start, end):
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def call_api(prompt, options, context):
    text = "\n".join(m["content"] for m in json.loads(prompt))
    if "Answer to grade:" in text:  # simpleqa
        gold = _between(text, "Gold answer:", "\nAnswer to grade:")
        answer = _between(text, "Answer to grade:", "\n\nReply with")
        if answer.lower().startswith(DECLINES):
            return {"output": "C"}
        return {"output": "A" if _agrees(answer, gold) else "B"}
    ideal = _between(text, "<expert_answer>", "</expert_answer>")
    answer = _between(text, "<submitted_answer>", "</submitted_answer>")
    category = "A" if _agrees(answer, ideal) else "D"
    return {"output": json.dumps({"category": category, "reason": "word overlap with the expert answer"})}
