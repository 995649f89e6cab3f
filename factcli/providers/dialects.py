"""Which reply schema each grader is sent: the step's schema in the form its server accepts.

- OpenAI (strict mode) and the litellm vendors get the step's schema as it is: it stays inside what
  OpenAI's strict mode takes, and litellm maps it for each vendor (Anthropic's `output_format`, Gemini's
  `responseJsonSchema` for Gemini 2.0 and later and its OpenAPI subset `responseSchema`, without
  `additionalProperties`, for older models; Ollama's `format`). tests/fake_vendors.py holds stand-ins
  for those servers that refuse what their documentation says they refuse.
- Grammar-backed local servers (llama.cpp's `llama-server`, vLLM, Ollama; an OpenAI-compatible server on
  this machine or a private network, and litellm's `ollama/`, `ollama_chat/` and `hosted_vllm/` ids) turn
  the schema into a grammar, which can bound lengths: their free-text fields carry a `maxLength` that fits
  inside the step's cap (scoring/replies.Reply.bounded_schema), so a small judge's reason ends before the
  cap instead of being cut off by it. Only what is sent changes; the reply is read with the step's reader.
"""

from __future__ import annotations

from factcli.providers import pricing

_GRAMMAR_IDS = ("ollama/", "ollama_chat/", "hosted_vllm/")


def grammar_backed(provider) -> bool:
    """A local server that constrains decoding with a grammar made from the schema. A config's
    `grammar: true|false` says so where the address does not tell (a local gateway to a hosted model, a
    llama.cpp server on a public address)."""
    module = type(provider).__module__
    if not module.endswith(("openai_provider", "litellm_provider")):
        return False  # script providers answer as they like
    config = getattr(provider, "config", None) or {}
    if config.get("grammar") is not None:
        return bool(config.get("grammar"))
    model = str(getattr(provider, "model", "") or "")
    if module.endswith("litellm_provider") and model.startswith(_GRAMMAR_IDS):
        return True
    return bool(getattr(provider, "local", False)) and not _hosted_elsewhere(model)


def _hosted_elsewhere(model: str) -> bool:
    """A model only a vendor serves (gpt-5, claude-…), sent to a local address: a gateway, not a grammar."""
    key = pricing.table_key(model.removeprefix("openai/"))
    entry = pricing._table().get(key) if key else None
    return bool(entry) and str(entry.get("litellm_provider")) in ("openai", "anthropic", "gemini")


def response_format_for(provider, reply, cap: int, items: int | None = None) -> dict:
    """The `response_format` a grader call to `provider` carries for a step's `reply` capped at `cap`."""
    if grammar_backed(provider):
        return reply.response_format(bounded_cap=cap, items=items)
    return reply.response_format()
