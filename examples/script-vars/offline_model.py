"""A stand-in model for the offline example (promptfoo's python provider contract): it answers with the
context line of its prompt."""


def call_api(prompt, options, context):
    lines = prompt.splitlines()
    answer = lines[lines.index("Context:") + 1]
    return {"output": answer, "tokenUsage": {"prompt": len(prompt.split()), "completion": len(answer.split())}}
