"""What one call asks of a provider: a `CallRequest`, made by the step that calls (a row by
run/executor.py, a grader step by scoring/grading.Grader.complete, a search or an embedding), adjusted
by run/calling/caller.Caller (its timeout, the form of structured output its endpoint takes, the parameters its
endpoint refused earlier in the run, a reasoning budget grown after a cut-off, a budget's reply cap),
and translated by the provider class into its own wire form. It is a value: nothing assigns to its
fields, a change is a new request (`dataclasses.replace(request, form="json_object")`).

What each provider makes of it (docs/architecture.md, "How a grader call travels"):
- `Provider.parameters(request)` (providers/base.py): the request's own parameters in OpenAI's names,
  which litellm takes too (sampling, the reply cap, `response_format`, and the reasoning parameters
  of the provider's family from `Provider.reasoning_parameters`). They are laid over the provider's
  config when sent, and they are what the response cache hashes beside the messages (run/calling/cache), as
  the untyped `overrides` were before, so a cached reply keeps its key.
- `OpenAIProvider.body(request)`: the JSON body of the POST to `/chat/completions` (or `/completions`).
- `LiteLLMProvider.kwargs(request)`: the keyword arguments of `litellm.acompletion` (model, messages,
  the API base and key, the timeout; the key is a secret: never store or print these as they are).
  Both are what a batch line's body is made of: one function each, the same for a direct call and a
  batch, with what the endpoint refused applied (`adaptations`).
- `Provider.reasoning_style()`: "openai", "anthropic", "gemini" or None, decided by the class (OpenAI's
  naming and litellm's model table; for litellm, the vendor of the model); `Provider.grammar_backed()`:
  whether its server turns the schema into a grammar (providers/dialects.py).
Script, echo, search and embedding providers read the prompt (and the timeout) and nothing else.
`RenderedPrompt` lives here too (providers/base.py re-exports it): a request wraps one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass
class RenderedPrompt:
    """A prompt rendered for one row: the text, the chat messages sent, the vars, and the row's request
    parameters."""

    text: str  # what promptfoo calls the prompt (raw text, or the JSON of chat messages)
    messages: list[dict]  # what chat APIs receive
    vars: dict = field(default_factory=dict)
    label: str = ""
    # request parameters for this call only (a test's options, a prompt function's config), merged over
    # the provider's own config; part of the cache key
    config: dict = field(default_factory=dict)
    template: str | None = None  # the prompt as written (promptfoo's `context.prompt.raw` for script providers)


PURPOSES = ("model", "grader", "search", "embedding")
FORMS = ("json_schema", "json_object", "plain")  # richest first: run/calling/caller.FormatMemory steps down them


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A reasoning grader's allowance: its hidden reasoning spends `budget` tokens out of the same output
    allowance as its reply of `cap` tokens (providers/reasoning.py). `style` is the family whose
    parameters carry it (`Provider.reasoning_style()`). `budget` None: the grader's own max_tokens is
    the whole allowance, its own thinking config stands, and a cut-off reply is not asked again."""

    style: str  # "openai" | "anthropic" | "gemini"
    cap: int
    budget: int | None = None

    def grown(self, ceiling: int) -> "Reasoning | None":
        """The budget doubled within `ceiling` (reasoning and reply), for a reply cut off while it reasoned;
        None when it cannot grow."""
        if self.budget is None:
            return None
        bigger = min(self.budget * 2, ceiling - self.cap)
        return None if bigger <= self.budget else replace(self, budget=bigger)


# Not frozen=True: a frozen dataclass's __init__ sets each of its fields through object.__setattr__, 1.6 us
# a request against 0.3 us, and every row makes one (2 % of a stored 10,000-row echo run). Nothing assigns
# to a request's fields: a change is a new request (dataclasses.replace), so one held elsewhere (an
# identical call in flight, a batch line) never changes under its holder.
@dataclass(slots=True)
class CallRequest:
    """One call's wishes. `prompt` is the rendered prompt (its messages, its text for completion and
    script providers, its vars and label, and `config`: the row's own request parameters, a test's
    options or a prompt function's config, laid over the provider's config)."""

    prompt: RenderedPrompt
    purpose: str = "model"  # "model" (a row) | "grader" | "search" | "embedding"
    repeat_idx: int = 0  # the same request asked again (`repeat`, a step's retry): its own cache entry
    # the reply's JSON schema and its name (a grader step's Reply), and the structured form asked for it:
    # "json_schema" (the schema), "json_object" (any JSON object), "plain" (no response_format)
    schema: dict | None = None
    schema_name: str | None = None
    form: str = "plain"
    # the visible reply's cap; None: the provider's config decides (its own max_tokens, else the model's)
    max_tokens: int | None = None
    # sampling asked by factcli (a grader's temperature 0 and fixed seed); None: the config's own
    temperature: float | None = None
    seed: int | None = None
    reasoning: Reasoning | None = None
    # Prompt caching: how many leading messages are static text shared by many calls (a grader's
    # instructions and document before the varying claim), which a provider may mark for its vendor's
    # prompt cache (providers/prompt_cache.py). 0: nothing is marked. Not in the cache key: the reply
    # does not depend on it.
    cache_prefix: int = 0
    # free-form notes about the call for whoever handles it (a batch line's id, the step's name): never
    # sent, never hashed
    metadata: dict | None = None
    timeout_s: float | None = None  # the per-attempt timeout, set by run/calling/caller (None: not set yet)
    # what the endpoint refused earlier in the run ({parameter: (action, arg)}, run/calling/caller.ParamMemory),
    # applied by the provider to its parameters before they are sent (providers/base.adapt)
    adaptations: dict | None = None

    @property
    def messages(self) -> list[dict]:
        return self.prompt.messages

    @property
    def text(self) -> str:
        return self.prompt.text

    @property
    def config(self) -> dict:
        return self.prompt.config

    def response_format(self) -> dict | None:
        """The `response_format` the request's form asks for, in OpenAI's shape (litellm maps it for
        the other vendors), or None for plain text."""
        if self.form == "json_schema" and self.schema is not None:
            return {"type": "json_schema", "json_schema": {"name": self.schema_name, "schema": self.schema,
                                                           "strict": True}}
        if self.form in ("json_schema", "json_object"):
            return {"type": "json_object"}
        return None

    def reply_allowance(self) -> int | None:
        """The most output tokens the request itself allows (its reasoning and its reply), or None when
        the provider's config decides."""
        r = self.reasoning
        if r is not None and r.budget is not None:
            return r.budget + r.cap
        return self.max_tokens
