"""assertScoringFunction fixtures (factcli parity fixture)."""


def weighted(named_scores, context):
    total = 2 * named_scores.get("a", 0) + named_scores.get("b", 0)
    score = total / 3
    comps = ",".join(str(c["pass"]) for c in context["componentResults"])
    return {"pass": score >= 0.5, "score": score, "reason": f"weighted {score:.3f} comps={comps} thr={context.get('threshold')}"}


def explode(named_scores, context):
    raise RuntimeError("python scoring exploded")


def func(named_scores, context):
    return {"pass": False, "score": 0.1, "reason": "default func"}
