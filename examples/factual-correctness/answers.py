"""Two canned answers (the seed's bad and good responses), as python providers."""


def wrong_year(prompt, options, context):
    return {"output": "Paris is the capital of France. The Eiffel Tower was built in 1500."}


def right(prompt, options, context):
    return {"output": "The capital of France is Paris. The Eiffel Tower was completed in 1889."}
