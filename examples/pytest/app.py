"""The application under test: a question-answering function (canned answers here, so that the
example runs offline; yours would call a model). One answer is wrong on purpose."""

ANSWERS = {
    "capital": "Paris is the capital of France.",
    "eiffel": "The Eiffel Tower was completed in 1887.",  # wrong: it was completed in 1889
    "louvre": "The Louvre is in Paris and opened as a museum in 1793.",
}


def answer(question: str) -> str:
    q = question.lower()
    for key, text in ANSWERS.items():
        if key in q or (key == "capital" and "capital" in q):
            return text
    return "I do not know."


def call_api(prompt, options, context):
    """The same app as a factcli provider (promptfooconfig.yaml)."""
    return {"output": answer(prompt)}
