import json
def fn(context):
    return 'PY ' + json.dumps(context['provider'])
