"""A small RAG system for the offline example (promptfoo's python provider contract): it retrieves
the two passages of a handbook that share the most words with the question, answers from them, and
returns the passages with the answer, in the response's metadata, where contextTransform reads them.

`grounded` answers with the best passage's sentence; `embellishing` adds a detail no passage holds,
as a model that fills gaps from memory does. Neither needs a key or the network.
"""

import re

PASSAGES = [
    "Employees get 25 days of paid vacation a year. Unused days carry over until March 31 of the next year.",
    "Remote work is allowed up to three days a week. Employees agree the days with their manager.",
    "Travel expenses are refunded within 30 days of the claim. Claims need the original receipts.",
    "The office is open from 7 am to 8 pm on weekdays. It is closed on public holidays.",
    "New laptops are issued every four years. A broken laptop is replaced within two working days.",
    "Parental leave is 16 weeks at full pay. It can be taken within two years of the birth or adoption.",
]
EXTRA = {
    "vacation": "Vacation days can also be sold back to the company at the end of the year.",
    "remote": "Employees working remotely get a monthly internet allowance of 50 euros.",
    "travel": "Business class is allowed on flights longer than four hours.",
}
STOP = set("a an and are as at be by can do does for from get how i in is it of on or the to what when "
           "which who within a year my many much long".split())


def _words(text):
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP}


def retrieve(question, k=2):
    asked = _words(question)
    ranked = sorted(PASSAGES, key=lambda p: len(asked & _words(p)), reverse=True)
    return [p for p in ranked[:k] if asked & _words(p)]


def _answer(question, embellish):
    passages = retrieve(question)
    if not passages:
        return "The handbook does not say.", passages
    answer = passages[0]
    if embellish:
        topic = next((t for t in EXTRA if t in question.lower() or t in answer.lower()), None)
        if topic:
            answer += " " + EXTRA[topic]
    return answer, passages


def _reply(prompt, embellish):
    question = prompt.rsplit("Question:", 1)[-1].strip()
    answer, passages = _answer(question, embellish)
    return {"output": answer, "metadata": {"contexts": passages}}


def grounded(prompt, options, context):
    return _reply(prompt, embellish=False)


def embellishing(prompt, options, context):
    return _reply(prompt, embellish=True)
