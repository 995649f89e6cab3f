"""A stand-in FActScore judge for offline runs (not a real model), as a python grader provider.

It reads factcli's default factscore prompts (see factcli/methods/factscore_prompts.py):
- decomposition (`<sentences>`): one atomic fact per sentence, with a leading He/She/They replaced
  by the topic;
- verification (`<passages>` and `<facts>`): a fact is true when every content word of it occurs in
  the passages shown, and the evidence is the passage sharing the most words with it.
Good enough to show the pipeline end to end; use a real model (--grader) to measure anything.
"""

import json
import re

STOP = {"a", "an", "the", "of", "in", "on", "at", "to", "and", "or", "was", "is", "were", "be", "by", "for",
        "with", "her", "his", "their", "he", "she", "they", "it", "its", "as", "from", "that", "during"}


def _words(text):
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP}


def _block(text, tag):
    return text.split(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


def _numbered(block):
    return [re.sub(r"^\d+\. ", "", line) for line in block.splitlines() if line.strip()]


def _decompose(text):
    m = re.search(r"^Topic: (.+)$", text, re.M)
    topic = m.group(1).strip() if m else ""
    facts = []
    for sentence in _numbered(_block(text, "sentences")):
        if topic:
            sentence = re.sub(r"^(He|She|They)\b", topic, sentence)
        facts.append(sentence)
    return {"facts": facts}


def _verify(text):
    passages = []
    for chunk in _block(text, "passages").split("\n\n"):
        head, _, body = chunk.partition("\n")
        number, title = re.match(r"\[(\d+)\] Title: (.*)", head).groups()
        passages.append((int(number), _words(f"{title} {body}")))
    everything = set().union(*(words for _, words in passages))
    verdicts = []
    for fact in _numbered(_block(text, "facts")):
        words = _words(fact)
        supported = words <= everything
        best = max(passages, key=lambda p: len(words & p[1]))
        missing = ", ".join(sorted(words - everything))
        verdicts.append({
            "fact": fact,
            "verdict": supported,
            "reason": "every content word appears in the passages" if supported else f"no passage mentions: {missing}",
            "evidence": best[0] if words & best[1] else None,
        })
    return {"verdicts": verdicts}


def call_api(prompt, options, context):
    text = json.loads(prompt)[-1]["content"]
    reply = _decompose(text) if "<sentences>" in text else _verify(text)
    return {"output": json.dumps(reply)}
