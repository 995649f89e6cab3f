"""The context of the grounding assertions: the passages the RAG system retrieved, from its response's
metadata. The same as the JavaScript one-liner `contextTransform: context.metadata.contexts`, without
needing Node.js."""


def passages(output, context):
    return context["metadata"]["contexts"]
