"""Judge panels: the one place where several judges' verdicts become one assertion result.

Every model-graded assertion that accepts `provider:` as a list (contract §4) hands its per-judge
outcomes to `aggregate()`. The rule, the same for all of them:

- each judge gives a score and a pass vote, or fails (an HTTP error after retries, a reply that
  cannot be read). A failed judge is left out of the aggregate and reported (in the reason, in
  `metadata.judges` with its `error`, and by name in `metadata.judgesFailed`); it is never counted
  as a verdict, because a made-up 0 or 1 would move the score by a judge's weight for no reason;
- if every judge fails, the assertion is a grading error;
- `config.aggregate`: `mean` (default): score = mean of the answering judges' scores, pass =
  score >= threshold; `majority`: pass = more pass votes than fail votes, and a tie is a grading
  error (no side won); `unanimous`: pass = every answering judge votes pass. The score is the
  mean in every mode;
- a panel of one judge is that judge's own verdict, so a single grader keeps its type's rules.

The family check (`model_family`) backs the self-preference warning of run/planning/graders.check_graders.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from factcli import templating

AGGREGATES = ("mean", "majority", "unanimous")


class PanelConfigError(ValueError):
    """A bad `config.aggregate`; handlers turn it into their own input error."""


def aggregate_mode(config: dict | None) -> str:
    value = (config or {}).get("aggregate", "mean")
    mode = str(value).strip().lower() if value is not None else "mean"
    if mode not in AGGREGATES:
        raise PanelConfigError(f"config.aggregate must be mean, majority or unanimous, got {value!r}")
    return mode


def judge_names(specs: list) -> list[str]:
    """Display names of a panel's judges (label, else id); repeats get `#2`, `#3` so each is unique."""
    names, seen = [], Counter()
    for spec in specs:
        base = spec.label or spec.id
        seen[base] += 1
        names.append(base if seen[base] == 1 else f"{base} #{seen[base]}")
    return names


@dataclass
class JudgeVerdict:
    """One judge's outcome: a score and a pass vote, or an error."""

    judge: str
    score: float | None = None
    passed: bool | None = None  # the judge's own vote; None means score >= threshold
    reason: str = ""
    cost: float | None = None
    error: str | None = None
    raw: str | None = None
    details: dict = field(default_factory=dict)  # method-specific keys for metadata.judges

    @property
    def failed(self) -> bool:
        return self.error is not None

    def vote(self, threshold: float) -> bool:
        return self.passed if self.passed is not None else self.score >= threshold

    def to_meta(self, threshold: float) -> dict:
        out: dict[str, Any] = {"judge": self.judge}
        if self.failed:
            out["error"] = self.error
        else:
            vote = self.vote(threshold)
            out.update({"score": self.score, "pass": vote, "verdict": "PASS" if vote else "FAIL"})
            if self.reason:
                out["reason"] = self.reason
        out.update(self.details)  # a method's own verdict wording wins over PASS/FAIL
        out["cost"] = self.cost
        return out


@dataclass
class Panel:
    """The aggregate of a panel. `error` set means the assertion is a grading error."""

    mode: str
    threshold: float
    verdicts: list[JudgeVerdict]
    score: float | None = None
    passed: bool = False
    error: str | None = None
    raw: str | None = None

    @property
    def answered(self) -> list[JudgeVerdict]:
        return [v for v in self.verdicts if not v.failed]

    @property
    def failed(self) -> list[JudgeVerdict]:
        return [v for v in self.verdicts if v.failed]

    @property
    def is_panel(self) -> bool:
        return len(self.verdicts) > 1

    def votes(self) -> tuple[int, int]:
        votes = [v.vote(self.threshold) for v in self.answered]
        return votes.count(True), votes.count(False)

    def rule(self) -> str:
        """How pass was decided, e.g. `mean of 3 judges`, `majority 2-1`, `unanimous 3-0`."""
        n = len(self.answered)
        if not self.is_panel:
            return "one judge"
        if self.mode == "mean":
            return f"mean of {n} judge{'s' if n != 1 else ''}"
        yes, no = self.votes()
        return f"{self.mode} {yes}-{no}"

    def failed_note(self) -> str:
        failed = self.failed
        if not failed:
            return ""
        were = "was" if len(failed) == 1 else "were"
        return (f"{len(failed)} of {len(self.verdicts)} judges failed and {were} left out: "
                + "; ".join(f"{v.judge}: {v.error}" for v in failed))

    def cost(self) -> float | None:
        costs = [v.cost for v in self.verdicts]
        return None if any(c is None for c in costs) else sum(costs)

    def judges_meta(self) -> list[dict]:
        return [v.to_meta(self.threshold) for v in self.verdicts]

    def metadata(self) -> dict:
        return {"aggregate": self.mode, "judges": self.judges_meta(),
                "judgesFailed": [v.judge for v in self.failed]}


def aggregate(verdicts: list[JudgeVerdict], threshold: float, mode: str = "mean") -> Panel:
    """Aggregate per-judge outcomes by the panel rule of this module's docstring."""
    if mode not in AGGREGATES:
        raise PanelConfigError(f"config.aggregate must be mean, majority or unanimous, got {mode!r}")
    panel = Panel(mode, threshold, list(verdicts))
    answered, failed = panel.answered, panel.failed
    if not answered:
        if not failed:
            panel.error = "no judges"
        elif len(failed) == 1:
            panel.error, panel.raw = failed[0].error, failed[0].raw
        else:
            panel.error = f"all {len(failed)} judges failed: " + "; ".join(f"{v.judge}: {v.error}" for v in failed)
            panel.raw = failed[0].raw
        return panel
    panel.score = sum(v.score for v in answered) / len(answered)
    if len(panel.verdicts) == 1:
        panel.passed = answered[0].vote(threshold)
    elif mode == "mean":
        panel.passed = panel.score >= threshold
    else:
        yes, no = panel.votes()
        if mode == "unanimous":
            panel.passed = no == 0
        elif yes == no:
            panel.error = f"the judges tie under majority voting ({yes} pass, {no} fail)"
        else:
            panel.passed = yes > no
    return panel


def describe(panel: Panel, fmt=None) -> str:
    """A reason for a panel's result: the rule, then one line per judge (failed judges included)."""
    fmt = fmt or (lambda x: templating.to_fixed(x, 2))
    relation = "≥" if panel.score is not None and panel.score >= panel.threshold else "<"
    head = (f"Judge panel {'PASS' if panel.passed else 'FAIL'} ({panel.rule()}; mean score {fmt(panel.score)} "
            f"{relation} {templating.js_string(panel.threshold)})")
    lines = [head]
    for v in panel.verdicts:
        if v.failed:
            lines.append(f"- {v.judge}: failed, left out: {_short(v.error)}")
        else:
            vote = "PASS" if v.vote(panel.threshold) else "FAIL"
            lines.append(f"- {v.judge}: {vote} {fmt(v.score)}" + (f": {_short(v.reason)}" if v.reason else ""))
    return "\n".join(lines)


def _short(text: str | None, limit: int = 300) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


# ---------------------------------------------------------------- model families

# Providers whose id names no language model: nothing to compare.
_NOT_MODELS = {"echo", "python", "exec", "file", "http", "https", "webhook", "javascript", "js", "sequence",
               "script", "manual-input", "browser", "websocket", "simulated-user", "mcp"}
# Ordered: the first pattern that matches the start of the model name names the family.
_FAMILIES = [
    (r"(gpt|chatgpt|o\d|davinci|babbage|text-davinci)", "openai gpt"),
    (r"claude", "anthropic claude"),
    (r"(gemini|gemma|palm|bison)", "google gemini"),
    (r"(llama|meta-llama|codellama)", "meta llama"),
    (r"(mistral|mixtral|ministral|codestral|magistral|pixtral|devstral|open-mistral)", "mistral"),
    (r"(qwen|qwq)", "qwen"),
    (r"deepseek", "deepseek"),
    (r"grok", "xai grok"),
    (r"(command|c4ai)", "cohere command"),
    (r"phi", "microsoft phi"),
    (r"(nova|titan)", "amazon nova"),
    (r"(sonar|pplx)", "perplexity sonar"),
    (r"kimi|moonshot", "moonshot kimi"),
    (r"glm|chatglm", "zhipu glm"),
]
_KINDS = {"chat", "messages", "completion", "responses", "embedding", "embeddings", "assistant"}


def model_name(provider_id: str) -> str | None:
    """The model part of a provider id (`openai:chat:gpt-5-mini` -> `gpt-5-mini`), lower-cased;
    None for providers that are not language models (echo, scripts, HTTP endpoints)."""
    pid = str(provider_id or "").strip().lower()
    if not pid or pid.startswith("file://"):
        return None
    vendor, _, rest = pid.partition(":")
    if vendor in _NOT_MODELS:
        return None
    if not rest:
        rest = vendor
    else:
        first, _, remainder = rest.partition(":")
        if first in _KINDS and remainder:
            rest = remainder
    # litellm/openrouter style `vendor/model`, bedrock style `us.anthropic.claude-…`
    rest = rest.rsplit("/", 1)[-1]
    rest = re.sub(r"^(?:[a-z]{2}\.)?(?:anthropic|meta|mistral|amazon|cohere|ai21|deepseek|qwen)\.", "", rest)
    return rest or None


def model_family(provider_id: str) -> str | None:
    """The model family of a provider id, for the self-preference warning: `openai:gpt-5` and
    `openai:chat:gpt-5-mini` are both "openai gpt", any `claude-*` is "anthropic claude". An
    unknown model's family is its leading word (`olmo-2-7b` -> "olmo"), None if that is too short
    to mean anything."""
    name = model_name(provider_id)
    if not name:
        return None
    for pattern, family in _FAMILIES:
        if re.match(pattern, name):
            return family
    m = re.match(r"[a-z]{3,}", name)
    return m.group(0) if m else None


def same_family(a: str, b: str) -> str | None:
    """The family two provider ids share, or None."""
    fa = model_family(a)
    return fa if fa is not None and fa == model_family(b) else None
