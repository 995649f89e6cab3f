"""An offline stand-in judge for facts-grounding: it answers every step of the FACTS protocol
from word overlap, so the example runs without a key. Replace it with real models (see
configs/facts-grounding.yaml) to measure anything.

The grader prompt arrives as the JSON text of the chat messages; the first line of the user
message names the step (see factcli/methods/facts_prompts.py). A sentence counts as supported
when at least `overlap` (config, default 0.8) of its content words appear in one sentence of the
context; a response of fewer than `min_words` (default 15) words has Major Issue(s).
"""

import json
import re

STOP = set("""a an and are as at be been by for from has have in into is it its of on or that the their
this to was were which while with will than then there these those also only mainly about after""".split())


def _tag(text, name):
    m = re.search(rf"<{name}>\n(.*?)\n</{name}>", text, re.S)
    return m.group(1) if m else ""


def _sentences(text):
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"])", text.strip()) if s.strip()]


def _words(text):
    return [w for w in re.findall(r"[a-z0-9]+(?:[.,][0-9]+)*", text.lower()) if w not in STOP]


def _best_excerpt(sentence, context_sentences):
    """(share of the sentence's content words found in the best context sentence, that sentence)."""
    words = set(_words(sentence))
    if not words:
        return None, None
    best = max(context_sentences, key=lambda c: len(words & set(_words(c))))
    return len(words & set(_words(best))) / len(words), best


def _labels(response, context, overlap):
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", context) if not p.startswith("#")]
    context_sentences = [s for p in paragraphs for s in _sentences(p)]
    out = []
    for sentence in _sentences(response):
        share, excerpt = _best_excerpt(sentence, context_sentences)
        if share is None:
            out.append((sentence, "no_rad", "Nothing to verify.", None))
        elif share >= overlap:
            out.append((sentence, "supported", f"{share:.0%} of its content words are in the context.", excerpt))
        else:
            out.append((sentence, "unsupported", f"Only {share:.0%} of its content words are in the context.", None))
    return out


def call_api(prompt, options, context):
    config = options.get("config") or {}
    overlap = float(config.get("overlap", 0.8))
    messages = json.loads(prompt)
    user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    step = user.splitlines()[0]
    if step.startswith("Instruction-following check"):
        response = _tag(user, "test_response")
        major = len(response.split()) < int(config.get("min_words", 15))
        verdict = "Major Issue(s)" if major else "No Issues"
        why = "The response is too vague to answer the request." if major else "The response answers the request."
        reply = f'Analysis: {why}\n```json\n{{"Instruction Following": "{verdict}"}}\n```'
    else:
        # span_level sends the request, the context and the response in a message before the span's
        data = "\n".join(m["content"] for m in messages if m["role"] == "user")
        response, doc = _tag(data, "response"), _tag(data, "context")
        if step.startswith("Grounding check: span"):
            response = _tag(user, "span")
        labels = _labels(response, doc, overlap)
        accurate = all(label in ("supported", "no_rad") for _, label, _, _ in labels)
        final = "Accurate" if accurate else "Inaccurate"
        if step.startswith("Grounding check: label every sentence"):
            reply = "\n".join(json.dumps({"sentence": s, "label": label, "rationale": why, "excerpt": ex})
                              for s, label, why, ex in labels)
        elif step.startswith("Grounding check: sentences and final answer"):
            lines = []
            for i, (s, label, _, ex) in enumerate(labels, 1):
                lines += [f"Sentence {i}: {s}", f"Sentence {i} evidence: {ex or 'none'}",
                          f"Sentence {i} label: {'Accurate' if label != 'unsupported' else 'Inaccurate'}"]
            reply = "\n".join(lines + [f"Final Answer: {final}"])
        else:  # span_level or response_level
            reply = f"Reasoning: compared word by word with the context.\nFinal Answer: {final}"
    return {"output": reply, "tokenUsage": {"prompt": len(prompt.split()), "completion": len(reply.split())}}
