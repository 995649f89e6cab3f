"""Embedding models for the `similar` assertion, through litellm (imported on first use).

`openai:embedding:MODEL` / `openai:embeddings:MODEL` (promptfoo's spelling) and any provider id
whose litellm model is an embedding model work; a chat id given as an embedder is used as is.
"""

from __future__ import annotations

from factcli.providers import pricing
from factcli.providers.base import Provider
from factcli.providers.litellm_provider import LiteLLMProvider, classify, litellm_module
from factcli.providers.request import CallRequest
from factcli.types import ProviderResponse, ProviderSpec, TokenUsage


def as_embedding_spec(spec: ProviderSpec) -> ProviderSpec:
    return ProviderSpec(id=spec.id, label=spec.label, config=dict(spec.config), prompts=None)


def embedding_model(pid: str) -> str:
    for kind in ("embedding", "embeddings"):
        marker = f":{kind}:"
        if marker in pid:
            vendor, model = pid.split(marker, 1)
            pid = f"{vendor}:{model}"
    from factcli.providers.litellm_provider import to_litellm_model

    return to_litellm_model(pid)


class EmbeddingProvider(LiteLLMProvider):
    def __init__(self, spec, base_dir=None):
        super().__init__(spec, base_dir)
        self.model = embedding_model(spec.id)

    def cache_identity(self) -> dict:
        return {**super().cache_identity(), "kind": "embedding"}

    def reasoning_style(self) -> str | None:
        return None

    async def call(self, request: CallRequest) -> ProviderResponse:
        litellm = litellm_module()
        kwargs = {k: v for k, v in self.call_kwargs().items() if k in ("api_base", "api_key", "extra_headers",
                                                                      "api_version", "timeout")}
        kwargs.setdefault("timeout", request.timeout_s or 300)
        try:
            resp = await litellm.aembedding(model=self.model, input=[request.prompt.text], num_retries=0, **kwargs)
        except Exception as exc:
            raise classify(exc) from None
        data = resp.data[0]
        vector = data["embedding"] if isinstance(data, dict) else data.embedding
        usage = getattr(resp, "usage", None)
        tokens = TokenUsage(num_requests=1)
        if usage is not None:
            tokens.prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
            tokens.total = int(getattr(usage, "total_tokens", 0) or tokens.prompt)
        cost = pricing.cost(self.model, tokens.prompt, 0) if usage is not None else None
        return ProviderResponse(output=list(vector), token_usage=tokens, cost=cost)


def is_embedding_id(pid: str) -> bool:
    return ":embedding:" in pid or ":embeddings:" in pid


__all__ = ["EmbeddingProvider", "Provider", "as_embedding_spec", "embedding_model", "is_embedding_id"]
