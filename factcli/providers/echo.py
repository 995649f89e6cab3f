"""`echo`: returns the rendered prompt. Offline examples, tests, and --model-outputs."""

from __future__ import annotations

from factcli.providers.base import Provider, register_provider
from factcli.providers.request import CallRequest
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

    async def call(self, request: CallRequest) -> ProviderResponse:
        return ProviderResponse(output=request.prompt.text, cost=0.0, finish_reason="stop")
