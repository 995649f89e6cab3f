"""An offline stand-in judge for the RAG example's context-faithfulness and context-recall: it answers
their steps in the words promptfoo's prompts ask for, deciding by word overlap instead of by reading,
so the example runs without a key. Use a real model (`--grader openai:gpt-5-mini`) to measure anything.

A statement counts as supported when at least `overlap` (config, default 0.8) of its words appear in
one passage of the context.
"""

import json
import re

STOP = set("a an and are as at be by for from in is it of on or the to up with".split())


def _tag(text, name):
    m = re.search(rf"<{name}>\n(.*?)\n</{name}>", text, re.S)
    return m.group(1) if m else ""


def _sentences(text):
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()]


def _supported(sentence, context, overlap):
    words = {w for w in re.findall(r"[a-z0-9]+", sentence.lower()) if w not in STOP}
    if not words:
        return True
    best = max((len(words & set(re.findall(r"[a-z0-9]+", p.lower()))) for p in context.split("\n")), default=0)
    return best / len(words) >= overlap


def call_api(prompt, options, context):
    overlap = float((options.get("config") or {}).get("overlap", 0.8))
    user = next(m["content"] for m in reversed(json.loads(prompt)) if m["role"] == "user")
    if "<statements>" in user:  # context-faithfulness, step 2: a verdict per statement
        ctx, verdicts, lines = _tag(user, "context"), [], []
        for i, line in enumerate(_tag(user, "statements").splitlines(), 1):
            statement = line.split(". ", 1)[-1]
            ok = _supported(statement, ctx, overlap)
            verdicts.append("Yes" if ok else "No")
            why = "A passage says so." if ok else "No passage says so."
            lines.append(f"{i}. {statement}\n{why} Verdict: {verdicts[-1]}.")
        reply = "\n".join(lines) + "\nFinal verdict for each statement in order: " + " ".join(f"{v}." for v in verdicts)
    elif "<question>" in user:  # context-faithfulness, step 1: the answer's statements, one a line
        reply = "\n".join(_sentences(_tag(user, "answer")))
    else:  # context-recall: each sentence of the reference, attributed to the context or not
        ctx = _tag(user, "context")
        reply = "\n".join(f"{i}. {s} So [{'Attributed' if _supported(s, ctx, overlap) else 'Not Attributed'}]"
                          for i, s in enumerate(_sentences(_tag(user, "answer")), 1))
    return {"output": reply}
