"""Three stand-in models for the offline run (promptfoo's python provider contract): they read their
answer from the test's vars, so the suite shows what SimpleQA's figures separate.

- `careful` gives TruthfulQA's best answer.
- `guesser` always answers, with TruthfulQA's first incorrect answer.
- `humble` gives the best answer to half the questions and says it does not know the rest.

Questions and answers: TruthfulQA (Lin, Hilton and Evans, ACL 2022), Apache License 2.0.
"""

import zlib


def careful(prompt, options, context):
    return {"output": context["vars"]["best_answer"] + "."}


def guesser(prompt, options, context):
    return {"output": context["vars"]["incorrect_answer"] + "."}


def humble(prompt, options, context):
    question = context["vars"]["question"]
    if zlib.crc32(question.encode()) % 2:  # a fixed half of the questions, the same on every run
        return {"output": "I don't know the answer to that."}
    return {"output": context["vars"]["best_answer"] + "."}
