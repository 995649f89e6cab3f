"""Which reply schema each grader is sent: the step's schema in the form its server accepts.

- OpenAI (strict mode) and the litellm vendors get the step's schema as it is: it stays inside what
  OpenAI's strict mode takes, and litellm maps it for each vendor (Anthropic's `output_format`, Gemini's
  `responseJsonSchema` for Gemini 2.0 and later and its OpenAPI subset `responseSchema`, without
  `additionalProperties`, for older models; Ollama's `format`). tests/fake_vendors.py holds stand-ins
  for those servers that refuse what their documentation says they refuse.
- Grammar-backed local servers (llama.cpp's `llama-server`, vLLM, Ollama; an OpenAI-compatible server on
  this machine or a private network, and litellm's `ollama/`, `ollama_chat/` and `hosted_vllm/` ids: the
  provider class says, `Provider.grammar_backed()`) turn
  the schema into a grammar, which can bound lengths: their free-text fields carry a `maxLength` that fits
  inside the step's cap (scoring/replies.Reply.bounded_schema), so a small judge's reason ends before the
  cap instead of being cut off by it. Only what is sent changes; the reply is read with the step's reader.
"""

from __future__ import annotations

from factcli.providers import pricing

GRAMMAR_IDS = ("ollama/", "ollama_chat/", "hosted_vllm/")  # litellm ids of grammar-backed servers


def served_with_grammar(config: dict, model: str, local: bool) -> bool:
    """The rule the OpenAI-compatible and litellm provider classes answer `grammar_backed()` with: a
    config's `grammar: true|false` first (a local gateway to a hosted model, a llama.cpp server on a
    public address), else a server on this machine or a private network that serves no vendor's own
    model. Script providers answer as they like and are never grammar-backed (base.Provider)."""
    if config.get("grammar") is not None:
        return bool(config.get("grammar"))
    return local and not _hosted_elsewhere(model)


def _hosted_elsewhere(model: str) -> bool:
    """A model only a vendor serves (gpt-5, claude-…), sent to a local address: a gateway, not a grammar."""
    key = pricing.table_key(model.removeprefix("openai/"))
    entry = pricing._table().get(key) if key else None
    return bool(entry) and str(entry.get("litellm_provider")) in ("openai", "anthropic", "gemini")


def schema_for(provider, reply, cap: int, items: int | None = None) -> dict:
    """The JSON schema a grader call to `provider` carries for a step's `reply` capped at `cap`."""
    if provider.grammar_backed():
        return reply.bounded_schema(cap, items)
    return reply.json_schema()
