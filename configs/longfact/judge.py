"""A stand-in judge for `safe`'s default prompts (factcli/methods/safe_prompts.py), for offline runs:
not a real model, word rules instead of reading.

- split (`<response>`): one fact per sentence;
- revise (`<fact>`): the first he/she/it becomes the question's subject; relevant when the fact
  shares a content word with the subject;
- query (`This is search N.`): the fact itself first, then no more searches;
- rate (`<statement>` and `<results>`): supported when every content word of the fact occurs in the
  results shown.
Good enough to show the pipeline end to end; use a real model (--grader) to measure anything.
"""

import json
import re

STOP = {"a", "an", "the", "of", "in", "on", "at", "to", "and", "or", "was", "is", "were", "be", "by", "for",
        "with", "her", "his", "its", "it", "he", "she", "as", "from", "that", "about", "one", "which", "during",
        "can", "you", "tell", "me", "what", "who"}


def _words(text):
    return {w for w in re.findall(r"[a-z0-9]+", text.lower().replace(",", "")) if w not in STOP}


def _block(text, tag):
    return text.split(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


def _subject(question):
    m = re.search(r"(?:about the |about |Who is )(.+?)\?", question)
    return m.group(1) if m else question


def reply(text):
    if "This is search" in text:
        step = int(re.search(r"This is search (\d+)", text).group(1))
        return {"query": _block(text, "statement") if step == 1 else ""}
    if "<statement>" in text:
        fact, results = _block(text, "statement"), _block(text, "results")
        missing = sorted(_words(fact) - _words(results))
        if not missing:
            return {"verdict": "supported", "reason": "every content word of the statement is in the results"}
        return {"verdict": "not_supported", "reason": "the results do not mention: " + ", ".join(missing)}
    if "<fact>" in text:
        subject = _subject(_block(text, "question"))
        fact = re.sub(r"\b(He|he|She|she|It|it)\b", subject, _block(text, "fact"), count=1)
        return {"fact": fact, "relevant": bool(_words(fact) & _words(subject))}
    response = _block(text, "response")
    return {"facts": [s.strip() for s in re.split(r"(?<=\.)\s+", response) if s.strip()]}


def call_api(prompt, options, context):
    return {"output": json.dumps(reply(json.loads(prompt)[-1]["content"]))}
