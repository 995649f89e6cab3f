"""Prompt caching: which part of a call's messages Anthropic is asked to cache.

A grading step says how many of its leading messages are the same from call to call (`static`: the
instructions, then the document; the claim or response it varies comes after). OpenAI caches such a
prefix by itself (from 1,024 tokens, in 128-token steps) and needs nothing from us. Anthropic caches
only up to a block marked `cache_control: {"type": "ephemeral"}`, at most 4 such breakpoints a
request, and only when the prompt up to the breakpoint is at least the model's minimum: a marked
prefix below it is sent uncached (no error), so a mark there would only use up a breakpoint.

A provider's `cache: false` (its config) sends no marks. It is not `evaluateOptions.cache` /
`--no-cache`, which is factcli's own response cache (run/calling/cache): that one serves a reply asked
before without calling the model; this one makes a call whose prompt starts the same way cheaper.
"""

from __future__ import annotations

import re

EPHEMERAL = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4

# The minimum cacheable prompt length by model, from Anthropic's prompt caching guide
# (https://docs.claude.com/en/docs/build-with-claude/prompt-caching#cache-limitations, as quoted in
# anthropics/anthropic-sdk-python#1194): 4,096 tokens for Claude Opus 4.6, Opus 4.5 and Haiku 4.5;
# 2,048 for Haiku 3.5 and Haiku 3; 1,024 for Sonnet 4.6, Sonnet 4.5, Opus 4.1, Opus 4, Sonnet 4 and
# Sonnet 3.7. First match wins; names as Anthropic writes them (claude-opus-4-5-20251101,
# claude-3-5-haiku-latest), also behind a router's prefix (anthropic/, bedrock/…, vertex_ai/).
_MINIMUMS = (
    (re.compile(r"opus-4-[56]|opus-4\.[56]|haiku-4-5|haiku-4\.5"), 4096),
    (re.compile(r"3-5-haiku|3\.5-haiku|haiku-3|3-haiku"), 2048),
)
DEFAULT_MINIMUM = 1024  # every other Claude model (Sonnet, Opus 4/4.1, Claude 3 Opus)


def caches(model: str) -> bool:
    """Whether `model` (litellm's id) takes Anthropic's cache marks: a Claude model, at Anthropic or
    through a cloud that passes them on (litellm turns them into Bedrock's cachePoint)."""
    return "claude" in (model or "").lower()


def minimum(model: str) -> int:
    name = (model or "").lower()
    for pattern, tokens in _MINIMUMS:
        if pattern.search(name):
            return tokens
    return DEFAULT_MINIMUM


def _marks(message: dict) -> int:
    content = message.get("content")
    own = 1 if message.get("cache_control") else 0
    if isinstance(content, list):
        own += sum(1 for part in content if isinstance(part, dict) and part.get("cache_control"))
    return own


def marked(messages: list[dict], model: str, static: int | None, config: dict | None = None) -> list[dict]:
    """`messages` with their static part's last message marked for Anthropic's cache, when the model
    caches, the provider's config allows it, the static part is followed by something that varies,
    the static part is long enough for the model (counted with providers/tokens' estimate) and a
    breakpoint is left of the 4. Otherwise `messages` themselves: the request is sent as it was."""
    if not static or static >= len(messages) or not caches(model) or (config or {}).get("cache") is False:
        return messages
    if sum(_marks(m) for m in messages) >= MAX_BREAKPOINTS:
        return messages
    from factcli.providers.tokens import count_messages

    counted = count_messages(messages[:static], model)
    if counted is None or counted < minimum(model):
        return messages
    out = list(messages)
    last = dict(out[static - 1])
    content = last.get("content")
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        last["content"] = [*content[:-1], {**content[-1], "cache_control": EPHEMERAL}]
    elif isinstance(content, str) and content:
        # litellm carries a message's cache_control onto the text block it makes of a string content
        # (litellm_core_utils/prompt_templates/factory.py, add_cache_control_to_content; the system
        # message's in llms/anthropic/chat/transformation.py)
        last["cache_control"] = EPHEMERAL
    else:
        return messages
    out[static - 1] = last
    return out


# OpenAI's automatic prefix caching starts at 1,024 tokens, as the smallest Anthropic minimum does
# (https://platform.openai.com/docs/guides/prompt-caching)
SMALLEST_MINIMUM = 1024


def worth_warming(messages: list[dict], static: int, config: dict | None = None) -> bool:
    """Whether calls that share `messages[:static]` should wait for the first of them (methods/claims.warmed):
    only when the shared part is long enough for some vendor to cache it (a shorter one would only make
    the row slower), and not for a grader whose config says `cache: false`."""
    if not static or (config or {}).get("cache") is False:
        return False
    from factcli.providers.tokens import count_messages

    counted = count_messages(messages[:static], "")
    return counted is not None and counted >= SMALLEST_MINIMUM
