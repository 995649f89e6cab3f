"""A stand-in model for the offline conversation example (promptfoo's python provider contract).

It answers from the chat messages it receives, so what it says depends on the history the prompt
sent: told "My name is Ada." in an earlier turn, it can answer "What is my name?".
"""

import json
import re


def call_api(prompt, options, context):
    messages = json.loads(prompt)  # a chat prompt reaches a python provider as its JSON text
    question = messages[-1]["content"]
    earlier = [m["content"] for m in messages[:-1] if m["role"] == "user"]
    return {"output": answer(question, earlier)}


def answer(question: str, earlier: list[str]) -> str:
    told = re.search(r"my name is (\w+)", question, re.IGNORECASE)
    if told:
        return f"Nice to meet you, {told.group(1)}."
    if re.search(r"what is my name", question, re.IGNORECASE):
        for text in reversed(earlier):
            told = re.search(r"my name is (\w+)", text, re.IGNORECASE)
            if told:
                return f"Your name is {told.group(1)}."
        return "I do not know your name yet."
    if re.search(r"name one city", question, re.IGNORECASE):
        return "Lisbon"
    season = re.search(r"best season to visit (\w+)", question, re.IGNORECASE)
    if season:
        return f"Spring is the best season to visit {season.group(1)}."
    return f"You said: {question}"
