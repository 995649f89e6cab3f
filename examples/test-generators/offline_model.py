"""A stand-in model for the offline example (promptfoo's python provider contract): it knows the
capitals, except that it confuses Turkey's capital with its largest city."""

import re

CAPITALS = {"Australia": "Canberra", "Canada": "Ottawa", "Turkey": "Istanbul", "Nigeria": "Abuja",
            "Morocco": "Rabat", "France": "Paris"}


def call_api(prompt, options, context):
    match = re.search(r"capital of (.+?)\?", prompt)
    country = match.group(1) if match else ""
    answer = CAPITALS.get(country, "I do not know that country.")
    return {"output": answer, "tokenUsage": {"prompt": len(prompt.split()), "completion": len(answer.split())}}
