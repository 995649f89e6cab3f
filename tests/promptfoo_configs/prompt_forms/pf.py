def fn(context):
    return "PY " + context["vars"]["q"]
