"""`echo`: returns the rendered prompt. Offline examples, tests, and --model-outputs."""

from __future__ import annotations

from factcli.providers.base import Provider, RenderedPrompt, register_provider
from factcli.types import ProviderResponse


@register_provider("echo")
class EchoProvider(Provider):
    cacheable = False
    takes_schema = False
    free = True
    in_process = True

    @staticmethod
    def validate(spec, base_dir) -> None:
        return None

    async def call(self, prompt: RenderedPrompt, context: dict) -> ProviderResponse:
        return ProviderResponse(output=prompt.text, cost=0.0, finish_reason="stop")
