"""An offline stand-in for an LLM judge of llm-rubric (not a real model): the rubric names, in
double quotes, what the output must mention; the verdict says which of them it lacks. Use a real
grader (--factcli-grader openai:gpt-5-mini) to judge anything that matters."""

import json
import re


def _between(text, start, end):
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def stand_in_judge(prompt, options=None, context=None):
    """promptfoo's provider contract: the grading prompt (JSON chat messages) in, the judge's reply out."""
    text = json.loads(prompt)[-1]["content"]
    output, rubric = _between(text, "<Output>", "</Output>"), _between(text, "<Rubric>", "</Rubric>")
    wanted = re.findall(r'"([^"]+)"', rubric)
    missing = [w for w in wanted if w.lower() not in output.lower()]
    reason = (f"The output mentions {', '.join(wanted)}." if not missing
              else f"The output does not mention {', '.join(missing)}.")
    return json.dumps({"pass": not missing, "score": 0.0 if missing else 1.0, "reason": reason})


def call_api(prompt, options, context):
    """The same judge as a provider file (promptfooconfig.yaml: file://judge.py), which returns a dict."""
    return {"output": stand_in_judge(prompt, options, context)}
