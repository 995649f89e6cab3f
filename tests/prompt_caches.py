"""The vendors' prompt caches, as their documentation describes them, for the stand-ins (issue 50).

A token is a whitespace-separated word, as everywhere in the stand-ins.

OpenAI's automatic prefix caching (fake_openai.FakeOpenAI, `prefix_cache`;
https://platform.openai.com/docs/guides/prompt-caching): every chat request of 1,024 tokens or more
is cached by itself, on the model, in 128-token steps: `usage.prompt_tokens_details.cached_tokens`
is the longest prefix of the prompt seen before on the same model, 1,024 + 128·k tokens, and 0 below
1,024 or on a first sight. A prefix is the tools and the structured output's schema, then the messages in
order, their roles included (the same words moved to another message are another prefix).
`prompt_tokens` still counts every token.

Anthropic's prompt caching (fake_vendors.FakeVendors, `anthropic_cache`;
https://docs.claude.com/en/docs/build-with-claude/prompt-caching): only a block marked
`cache_control: {"type": "ephemeral"}` is a breakpoint (at most 4 a request: a fifth is a 400); the
prefix is the system blocks then the messages' blocks, up to and including the marked one, on the same
model. A breakpoint whose prefix is below the model's minimum (1,024 tokens; 2,048 for Haiku 3/3.5;
4,096 for Opus 4.5/4.6 and Haiku 4.5) is not cached, silently. The longest marked prefix seen before is
read (`cache_read_input_tokens`), the marked prefixes past it are written
(`cache_creation_input_tokens`, up to the last breakpoint), and `input_tokens` counts only the tokens
after the last breakpoint read or written. An entry lives 5 minutes (`ttl: "1h"`: an hour) from its
last use, on `clock`; and it is there only once the response that wrote it is sent: requests sent at
once all miss (`latency` seconds between a request and its reply make that visible).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from typing import Any, Callable

OPENAI_MINIMUM = 1024
OPENAI_STEP = 128


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(p.get("text", "")) for p in content if isinstance(p, dict)]
    return []


class OpenAIPrefixCache:
    """What OpenAI's automatic prefix caching would have cached for a request."""

    def __init__(self) -> None:
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()
        self.hits: list[int] = []  # cached_tokens of each request seen, in order

    def cached_tokens(self, model: str, messages: list[dict], before: Any = None) -> int:
        """The cached prefix of this request (0, or 1,024 + 128·k), and the request's own prefixes kept.
        `before`: what OpenAI puts ahead of the messages (the tools, the structured output's schema): a
        request that changes it shares no prefix with the ones before."""
        words: list[str] = []
        for i, message in enumerate(messages or []):
            role = str(message.get("role", "")) if isinstance(message, dict) else ""
            for text in _texts(message.get("content") if isinstance(message, dict) else None):
                words += [f"{i}\x1f{role}\x1f{w}" for w in text.split()]
        h = hashlib.sha256(model.encode() + b"\x1e" + json.dumps(before, sort_keys=True, default=str).encode())
        digests = []
        done = 0
        for end in range(OPENAI_MINIMUM, len(words) + 1, OPENAI_STEP):
            h.update("\x1e".join(words[done:end]).encode() + b"\x1e")
            done = end
            digests.append((end, h.digest()))
        with self._lock:
            hit = max((end for end, d in digests if d in self._seen), default=0)
            self._seen.update(d for _, d in digests)
            self.hits.append(hit)
        return hit


# the minimum cacheable prompt by model (first match), as in Anthropic's table
ANTHROPIC_MINIMUMS = ((re.compile(r"opus-4-[56]|haiku-4-5"), 4096), (re.compile(r"3-5-haiku|3-haiku|haiku-3"), 2048))
ANTHROPIC_DEFAULT_MINIMUM = 1024
MAX_BREAKPOINTS = 4
LOOKBACK = 20  # blocks before a breakpoint where a hit is looked for
TTL = {"5m": 300.0, "1h": 3600.0}


def anthropic_minimum(model: str) -> int:
    for pattern, tokens in ANTHROPIC_MINIMUMS:
        if pattern.search(model):
            return tokens
    return ANTHROPIC_DEFAULT_MINIMUM


class AnthropicCache:
    """Anthropic's cache of marked prefixes. `usage(body)` reads it for a request: the usage fields and
    the entries the request writes once its reply is sent (`keep`), or an error message (a 400)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._entries: dict[bytes, float] = {}  # prefix digest -> when it expires
        self._lock = threading.Lock()
        self.usages: list[dict] = []  # the usage of every request answered, in order

    @staticmethod
    def _blocks(body: dict) -> list[tuple[int, dict | None, str]]:
        """(tokens, cache_control, identity) of every block in prompt order: system, then messages."""
        out = []
        system = body.get("system")
        parts = [{"type": "text", "text": system}] if isinstance(system, str) else system or []
        for part in parts:
            if isinstance(part, dict):
                text = str(part.get("text", ""))
                out.append((len(text.split()), part.get("cache_control"), f"system\x1f{text}"))
        for message in body.get("messages") or []:
            content = message.get("content")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            for part in parts:
                if isinstance(part, dict):
                    text = str(part.get("text", part.get("content", "")))
                    out.append((len(text.split()), part.get("cache_control"),
                                f"{message.get('role')}\x1f{part.get('type')}\x1f{text}"))
        return out

    def usage(self, body: dict) -> tuple[dict, list[tuple[bytes, float]]] | str:
        model = str(body.get("model", ""))
        blocks = self._blocks(body)
        marks = sum(1 for _, mark, _ in blocks if mark)
        if marks > MAX_BREAKPOINTS:
            return f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {marks}."
        h = hashlib.sha256(model.encode())
        total = 0
        bounds = []  # (tokens up to and with each block, digest of that prefix)
        points = []  # (block index, tokens, digest, ttl) of each breakpoint long enough
        for i, (tokens, mark, identity) in enumerate(blocks):
            h.update(identity.encode() + b"\x1e")
            total += tokens
            bounds.append((total, h.digest()))
            if mark:
                ttl = mark.get("ttl", "5m") if isinstance(mark, dict) else "5m"
                if not isinstance(mark, dict) or mark.get("type") != "ephemeral" or ttl not in TTL:
                    return "cache_control: Input tag does not match the expected tags ('ephemeral')"
                if total >= anthropic_minimum(model):
                    points.append((i, total, bounds[-1][1], TTL[ttl]))
        now = self.clock()
        with self._lock:
            read = 0
            # from the last breakpoint back, each looking back over the block boundaries before it
            # (about 20 blocks, the guide says) for a prefix a request before wrote
            for i, _, _, ttl in reversed(points):
                for j in range(i, max(-1, i - LOOKBACK - 1), -1):
                    end, digest = bounds[j]
                    expires = self._entries.get(digest)
                    if expires is not None and expires > now:
                        read = end
                        self._entries[digest] = now + ttl  # a read refreshes the entry
                        break
                if read:
                    break
        points = [(end, digest, ttl) for _, end, digest, ttl in points]
        written = [(end, digest, ttl) for end, digest, ttl in points if end > read]
        last = max([read] + [end for end, _, _ in written])
        usage = {"input_tokens": total - last, "cache_creation_input_tokens": last - read,
                 "cache_read_input_tokens": read}
        return usage, [(digest, ttl) for _, digest, ttl in written]

    def keep(self, usage: dict, written: list[tuple[bytes, float]]) -> None:
        """The reply is sent: its entries are there for the requests that come after."""
        now = self.clock()
        with self._lock:
            for digest, ttl in written:
                self._entries[digest] = now + ttl
            self.usages.append(usage)
