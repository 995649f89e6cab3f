"""A scripted model and judge for the batch tests and benchmarks/batch_cost.py: one deterministic reply per
request (the model's answer; factuality's category; factual-correctness's claims and verdicts), so a
batched run and a direct run can be compared verdict for verdict."""

from __future__ import annotations

import json


def config(n: int, base_url: str, extra_eval: str = "") -> str:
    """n rows, each graded by factuality and factual-correctness; model and grader gpt-4o-mini at `base_url`
    (a model OpenAI serves: priced from litellm's table though the server is local)."""
    provider = f'{{id: "openai:chat:gpt-4o-mini", config: {{apiBaseUrl: "{base_url}"}}}}'
    lines = [
        'prompts: ["Question {{i}}: say what the city {{i}} is famous for."]',
        f"providers: [{provider}]",
        f"defaultTest:\n  options:\n    provider: {provider}",
        "evaluateOptions: {maxConcurrency: 8" + extra_eval + "}",
        "tests:",
    ]
    for i in range(n):
        ref = f"City {i} is famous for its bridge. City {i} has {i % 7 + 2} museums."
        lines.append(f"  - vars: {{i: {i}}}\n    assert:\n      - {{type: factuality, value: \"{ref}\"}}\n"
                     f"      - {{type: factual-correctness, value: \"{ref}\"}}")
    return "\n".join(lines) + "\n"


def answer(i: int) -> str:
    wrong = i % 3 == 0  # every third answer gets the museums wrong
    return f"City {i} is famous for its bridge. City {i} has {(i % 7 + 2) + (1 if wrong else 0)} museums."


def scripted(body: dict) -> str:
    text = body["messages"][-1]["content"]
    if text.startswith("Question "):
        return answer(int(text.split()[1].rstrip(":")))
    if text.startswith("<text>"):
        source = text.split("<text>\n", 1)[1].rsplit("\n</text>", 1)[0]
        return json.dumps({"claims": [c.strip().rstrip(".") for c in source.split(". ") if c.strip()]})
    if "<premise>" in text:
        premise = text.split("<premise>\n", 1)[1].split("\n</premise>", 1)[0]
        block = text.split("<claims>\n", 1)[1].rsplit("\n</claims>", 1)[0]
        claims = [line.split(". ", 1)[1] for line in block.splitlines()]
        return json.dumps({"verdicts": [{"claim": c, "verdict": "SUPPORTED" if c in premise else "CONTRADICTED",
                                         "reason": "scripted"} for c in claims]})
    if "<submitted_answer>" in text:
        sub = text.split("<submitted_answer>\n", 1)[1].split("\n</submitted_answer>", 1)[0]
        exp = text.split("<expert_answer>\n", 1)[1].split("\n</expert_answer>", 1)[0]
        return json.dumps({"category": "C" if sub.strip() == exp.strip() else "D", "reason": "scripted"})
    return "unexpected request"
