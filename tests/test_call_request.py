"""The typed request (issue 50 item 1): each provider class translates a CallRequest into its own wire
form and owns its reasoning style and schema dialect; the cache key is the one the untyped overrides made,
so replies cached before the typed request are still served."""

from dataclasses import replace

from factcli.providers.base import RenderedPrompt
from factcli.providers.echo import EchoProvider
from factcli.providers.litellm_provider import LiteLLMProvider
from factcli.providers.openai_provider import OpenAIProvider
from factcli.providers.request import CallRequest, Reasoning
from factcli.providers.script import PythonProvider
from factcli.run.calling.cache import cache_key
from factcli.run.calling.caller import Caller, FormatMemory
from factcli.types import ProviderSpec

MESSAGES = [{"role": "user", "content": "Is the sky green?"}]
PROMPT = RenderedPrompt(text="Is the sky green?", messages=MESSAGES)
SCHEMA = {"type": "object", "properties": {"grade": {"type": "string"}}, "required": ["grade"],
          "additionalProperties": False}
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "grade", "schema": SCHEMA, "strict": True}}


def grader_request(**kw) -> CallRequest:
    return CallRequest(PROMPT, purpose="grader", schema=SCHEMA, schema_name="grade", form="json_schema",
                       max_tokens=64, temperature=0, seed=0, **kw)


class _Cache:
    def get(self, key):
        return None


def test_a_grader_request_keeps_the_cache_key_of_the_overrides_it_replaces():
    """The parameters each class makes of a grader request are, key for key, the `overrides` dict
    scoring/grading built before (written out here by hand), and Caller's key is cache_key over them."""
    plain = OpenAIProvider(ProviderSpec("openai:gpt-4o-mini"))
    thinking = OpenAIProvider(ProviderSpec("openai:gpt-5-mini"))
    claude = LiteLLMProvider(ProviderSpec("anthropic:messages:claude-sonnet-4-20250514", config={"reasoning": True}))
    gemini = LiteLLMProvider(ProviderSpec("gemini:gemini-2.5-flash"))
    cases = [
        (plain, grader_request(),
         {"temperature": 0, "seed": 0, "drop_params": True, "max_tokens": 64, "response_format": RESPONSE_FORMAT}),
        (thinking, grader_request(reasoning=Reasoning("openai", 64, 2048)),
         {"max_completion_tokens": 2112, "seed": 0, "drop_params": True, "reasoning_effort": "low",
          "response_format": RESPONSE_FORMAT}),
        (claude, grader_request(reasoning=Reasoning("anthropic", 64, 1024)),
         {"max_tokens": 1088, "thinking": {"type": "enabled", "budget_tokens": 1024}, "reasoning_effort": None,
          "drop_params": True, "response_format": RESPONSE_FORMAT}),
        (gemini, replace(grader_request(reasoning=Reasoning("gemini", 64, 1024)), form="json_object"),
         {"max_tokens": 1088, "thinking": {"type": "enabled", "budget_tokens": 1024}, "reasoning_effort": None,
          "temperature": 0, "seed": 0, "drop_params": True, "response_format": {"type": "json_object"}}),
        # the grader's own max_tokens is the whole allowance: no cap, no thinking sent
        (claude, replace(grader_request(reasoning=Reasoning("anthropic", 64, None)), max_tokens=None, form="plain"),
         {"reasoning_effort": None, "drop_params": True}),
    ]
    caller = Caller(_Cache())
    for provider, request, overrides in cases:
        assert provider.parameters(request) == overrides
        assert caller._key(provider, request) == cache_key(provider.cache_identity(), MESSAGES, 0, overrides, {})
    # a row's request asks nothing of its own: the key of a call made without overrides
    row = CallRequest(PROMPT, repeat_idx=2)
    assert plain.parameters(row) == {}
    assert caller._key(plain, row) == cache_key(plain.cache_identity(), MESSAGES, 2, None, {})


def test_each_class_says_how_its_model_reasons_and_whether_a_grammar_holds_its_schema(tmp_path):
    def openai(model, **config):
        return OpenAIProvider(ProviderSpec(f"openai:{model}", config=config))

    def litellm(pid, **config):
        return LiteLLMProvider(ProviderSpec(pid, config=config))

    assert openai("gpt-5").reasoning_style() == "openai"
    assert openai("gpt-4o").reasoning_style() is None
    assert openai("my-model", reasoning=True).reasoning_style() == "openai"  # OpenAI's protocol, whatever the name
    assert litellm("anthropic:messages:claude-sonnet-4-20250514").reasoning_style() is None  # thinking only if asked
    assert litellm("anthropic:messages:claude-sonnet-4-20250514", thinking={"type": "enabled"}).reasoning_style() \
        == "anthropic"
    assert litellm("gemini:gemini-2.5-flash").reasoning_style() == "gemini"
    assert litellm("litellm:openai/o3-mini").reasoning_style() == "openai"
    assert litellm("gemini:gemini-2.5-flash", reasoning=False).reasoning_style() is None
    # user code and echo take no parameters, whatever their config says
    script = PythonProvider(ProviderSpec("python:judge.py", config={"reasoning": True, "grammar": True}), tmp_path)
    assert script.reasoning_style() is None and script.grammar_backed() is False
    assert EchoProvider(ProviderSpec("echo", config={"reasoning": True})).reasoning_style() is None

    assert openai("llama", apiBaseUrl="http://127.0.0.1:8080/v1").grammar_backed() is True
    assert openai("gpt-5", apiBaseUrl="http://127.0.0.1:4000/v1").grammar_backed() is False  # a gateway
    assert openai("llama", apiBaseUrl="http://127.0.0.1:8080/v1", grammar=False).grammar_backed() is False
    assert openai("gpt-4o").grammar_backed() is False
    assert litellm("ollama:chat:llama3").grammar_backed() is True
    assert litellm("litellm:hosted_vllm/qwen", apiBaseUrl="https://vllm.example.com/v1").grammar_backed() is True
    assert litellm("anthropic:messages:claude-sonnet-4-20250514").grammar_backed() is False


def test_the_wire_forms_apply_what_the_endpoint_refused():
    """OpenAIProvider.body and LiteLLMProvider.kwargs: the one translation a call (and a batch line) uses,
    with the learned refusals (`adaptations`) applied and the call's timeout."""
    provider = OpenAIProvider(ProviderSpec("openai:o3", config={"temperature": 0.2}))
    request = replace(grader_request(), adaptations={"max_tokens": ("rename", "max_completion_tokens"),
                                                     "temperature": ("drop", None)})
    body = provider.body(request)
    assert body == {"model": "o3", "seed": 0, "max_completion_tokens": 64, "response_format": RESPONSE_FORMAT,
                    "messages": MESSAGES}
    assert provider.body(replace(request, form="plain"))["max_completion_tokens"] == 64
    assert "response_format" not in provider.body(replace(request, form="plain"))

    claude = LiteLLMProvider(ProviderSpec("anthropic:messages:claude-sonnet-4-20250514", config={"apiKey": "k"}))
    system_only = CallRequest(RenderedPrompt(text="", messages=[{"role": "system", "content": "Grade it."}]),
                              purpose="grader", timeout_s=12.5)
    kwargs = claude.kwargs(system_only)
    assert kwargs["messages"] == [{"role": "user", "content": "Grade it."}]  # Anthropic takes no system-only turn
    assert (kwargs["model"], kwargs["timeout"], kwargs["num_retries"], kwargs["drop_params"]) == \
        ("anthropic/claude-sonnet-4-20250514", 12.5, 0, True)


def test_a_reasoning_budget_grows_within_the_ceiling_and_the_format_steps_down():
    assert Reasoning("openai", 64, 2048).grown(32768) == Reasoning("openai", 64, 4096)
    assert Reasoning("openai", 64, 20000).grown(32768) == Reasoning("openai", 64, 32768 - 64)
    assert Reasoning("openai", 64, 32768 - 64).grown(32768) is None
    assert Reasoning("anthropic", 64, None).grown(32768) is None  # the grader's own cap: not grown
    assert grader_request(reasoning=Reasoning("openai", 64, 2048)).reply_allowance() == 2112
    assert grader_request().reply_allowance() == 64

    memory = FormatMemory()
    asked = grader_request()
    assert memory.apply("e", asked) is asked
    memory.downgrade("e", "json_schema")
    assert memory.apply("e", asked).response_format() == {"type": "json_object"}
    memory.downgrade("e", "json_object")
    assert memory.apply("e", asked).form == "plain" and memory.apply("e", asked).response_format() is None
    assert memory.apply("e", replace(asked, form="plain")).form == "plain"
    assert asked.form == "json_schema"  # a change is a new request: the one asked is as it was
