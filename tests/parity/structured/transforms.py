"""Test-level transform for the structured parity fixture: the echoed text parsed as JSON."""

import json


def parse_json(output, context):
    return json.loads(output)
