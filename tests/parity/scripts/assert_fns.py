"""Assertion functions used by promptfooconfig.yaml (factcli parity fixture)."""


def get_assert(output, context):
    return context["vars"]["word"] in output


def ratio(output, context):
    return len(output) / 100


def graded(output, context):
    ok = output.endswith(context["config"]["suffix"])
    return {"pass": ok, "score": 0.8 if ok else 0.2, "reason": "ends right" if ok else "ends wrong"}


def snake(output, context):
    return {"pass_": True, "score": 0.6, "reason": "snake case keys", "named_scores": {"style": 0.6}}


def explode(output, context):
    raise ValueError("python function exploded")


def text_true(output, context):
    return "true"


def bad_shape(output, context):
    return {"pass": True}


async def aio(output, context):
    return {"pass": True, "score": 0.7, "reason": "async " + context["vars"]["word"]}
