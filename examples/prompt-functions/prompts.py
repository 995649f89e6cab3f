"""A prompt function: promptfoo calls chat(context) once per row with context["vars"], context["provider"]
({id, label}) and context["config"] (the prompt entry's config). It may return a string, a list of chat
messages, or {"prompt": ..., "config": {...}} whose config becomes request parameters for this call."""


def chat(context):
    v = context["vars"]
    messages = [
        {"role": "system", "content": f"You are {v['persona']}. Answer in one sentence."},
        {"role": "user", "content": v["question"]},
    ]
    return {"prompt": messages, "config": {"temperature": 0.2, "max_tokens": 200}}
