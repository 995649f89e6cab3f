"""contextTransforms for the parity fixture.

A list-valued var would expand into one row per element, so list contexts come from a transform.
"""

import json


def get_context(output, context):
    """The provider answers with JSON that carries its own context."""
    return json.loads(output)["context"]


def chunks(output, context):
    """The `chunks` var, split on "|", as a list of context chunks."""
    return context["vars"]["chunks"].split("|")
