"""A scripted provider for the operational parity fixture (promptfoo's and factcli's python provider
contract): the output is the prompt, and the test's vars supply the rest of the response."""

import json


def call_api(prompt, options, context):
    v = context.get("vars") or {}
    response = {"output": prompt}
    if v.get("logprobs"):
        response["logProbs"] = json.loads(v["logprobs"])
    if v.get("finish"):
        response["finishReason"] = v["finish"]
    if v.get("cost"):
        response["cost"] = float(v["cost"])
    return response
