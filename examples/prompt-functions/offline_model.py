"""A stand-in model for the offline example (promptfoo's python provider contract): it reads the chat
messages the prompt function built and answers in the persona the system message gives."""

import json

CAPITALS = {"France": "Paris", "Japan": "Tokyo"}


def call_api(prompt, options, context):
    messages = json.loads(prompt)  # a chat prompt reaches a python provider as its JSON text
    system = next(m["content"] for m in messages if m["role"] == "system")
    question = messages[-1]["content"]
    country = next((c for c in CAPITALS if c in question), None)
    answer = f"The capital is {CAPITALS[country]}." if country else "I do not know."
    if "pirate" in system:
        answer = "Arr, " + answer[0].lower() + answer[1:]
    return {"output": answer, "tokenUsage": {"prompt": len(prompt.split()), "completion": len(answer.split())}}
