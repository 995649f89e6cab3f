"""Prompt caching on one long document graded claim by claim (issue 50): facts-grounding's span_level
(one grader call a span) and factscore (decomposition, then verification batches), on a report of 1,920
tokens and an answer of N of its sentences, against the stand-ins of tests/ (a token is a word):

- the Anthropic stand-in (tests/prompt_caches.AnthropicCache, claude-sonnet-4-5 through litellm), with and
  without the provider's `cache: false`: input tokens at full price, cache writes, cache reads, and the
  input spend priced by hand (full price 1, writes 1.25, reads 0.1, in full-price tokens);
- the OpenAI stand-in (automatic prefix caching, gpt-4o through factcli's OpenAI client): cached_tokens;
- for both methods, how many leading tokens the step's calls share (the prompt as a list of words, each
  with its message's place and role): what a prefix cache can serve.

    python benchmarks/prompt_cache.py [--spans 30] [--src OTHER_TREE]

`--src` runs another factcli tree (`git archive main factcli | tar -x -C /tmp/before`): the layout
before the change. A tree without `cache: false` is run with caching only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from common import ROOT, factcli  # noqa: E402
from fake_openai import FakeOpenAI  # noqa: E402
from fake_vendors import FakeVendors, instance  # noqa: E402
from prompt_caches import AnthropicCache  # noqa: E402

SENTENCE = "Station {i} on the Varn river recorded {n} millimetres of rain in week {i} of the survey."


def document(spans: int) -> tuple[str, str]:
    sentences = [SENTENCE.format(i=i, n=i * 7 % 97) for i in range(120)]
    return " ".join(sentences), " ".join(sentences[(i * 4) % 120] for i in range(spans))


def _last_text(body: dict) -> str:
    last = body["messages"][-1]["content"]
    return last[-1]["text"] if isinstance(last, list) else last


def _users(body: dict) -> str:
    out = []
    for m in body["messages"]:
        c = m["content"]
        out += [b.get("text", "") for b in c] if isinstance(c, list) else [c]
    return "\n".join(out)


def reply_for(body: dict, schema: dict | None):
    """The judge: every span Accurate, every fact supported by passage 1, the facts the answer's sentences."""
    text = _last_text(body)
    span = re.search(r"<span>\n(.*?)\n</span>", text, re.S)
    if span:
        return {"reasoning": "The report states it.", "evidence": span.group(1), "final_answer": "Accurate"}
    facts = re.search(r"<facts>\n(.*?)\n</facts>", text, re.S)
    if facts:
        listed = [re.sub(r"^\d+\.\s*", "", line) for line in facts.group(1).splitlines()]
        return {"verdicts": [{"fact": f, "verdict": True, "reason": "The passage states it.", "evidence": 1}
                             for f in listed]}
    sentences = re.search(r"<sentences>\n(.*?)\n</sentences>", _users(body), re.S)
    if sentences:
        return {"facts": [re.sub(r"^\d+\.\s*", "", line) for line in sentences.group(1).splitlines()]}
    if schema is not None:
        return instance(schema)
    return None


def openai_rule(body: dict):
    value = reply_for(body, None)
    if value is None:  # facts-grounding's eligibility, in its text form
        return 'Analysis: the answer summarises the survey.\n```json\n{"Instruction Following": "No Issues"}\n```'
    if "final_answer" in value:
        return f"Evidence: {value['evidence']}\nReasoning: {value['reasoning']}\nFinal Answer: Accurate"
    return json.dumps(value)


def config(method: str, grader: str, doc: str, answer: str, kb: Path) -> str:
    check = ("{type: facts-grounding, config: {template: span_level}}" if method == "facts-grounding"
             else f"{{type: factscore, config: {{knowledge: '{kb}', topic: Varn river survey}}}}")
    return (f'prompts: ["{{{{answer}}}}"]\nproviders: [echo]\n'
            f"defaultTest:\n  options:\n    provider: {grader}\n"
            f'tests:\n  - vars: {{request: "Summarise the rainfall survey.", context: "{doc}", answer: "{answer}"}}\n'
            f"    assert: [{check}]\n")


def words(body: dict) -> list[tuple]:
    """The prompt as (message place, role, word), system first (Anthropic's `system` included)."""
    out = []
    system = body.get("system")
    for block in ([{"text": system}] if isinstance(system, str) else system or []):
        out += [(-1, "system", w) for w in block.get("text", "").split()]
    for i, m in enumerate(body.get("messages") or []):
        c = m["content"]
        for text in ([b.get("text", "") for b in c] if isinstance(c, list) else [c or ""]):
            out += [(i, m["role"], w) for w in text.split()]
    return out


def shared_lead(bodies: list[dict]) -> int:
    seqs = [words(b) for b in bodies]
    if len(seqs) < 2:
        return 0
    n = 0
    while all(n < len(s) for s in seqs) and len({s[n] for s in seqs}) == 1:
        n += 1
    return n


def step_calls(method: str, bodies: list[dict]) -> list[dict]:
    """The calls of the step that repeats over the claims: span_level's spans, factscore's verifications."""
    mark = "<span>" if method == "facts-grounding" else "<facts>"
    return [b for b in bodies if mark in _last_text(b)]


def spend(usage: dict) -> float:
    return usage["input_tokens"] + 1.25 * usage["cache_creation_input_tokens"] + 0.1 * usage["cache_read_input_tokens"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spans", type=int, default=30, help="sentences of the answer (claims), default 30")
    ap.add_argument("-j", type=int, default=4)
    ap.add_argument("--src", help="run the factcli of this source tree (default: this checkout)")
    args = ap.parse_args()
    src = args.src or str(ROOT)
    takes_cache_key = (Path(src) / "factcli/providers/prompt_cache.py").exists()
    doc, answer = document(args.spans)
    print(f"factcli from {src}; a report of {len(doc.split())} tokens, an answer of {args.spans} sentences, "
          f"-j {args.j}")
    with tempfile.TemporaryDirectory() as tmp, FakeVendors(judge=reply_for) as vendors, \
            FakeOpenAI(rules=[(".", openai_rule)]) as openai_server:
        vendors.cache_latency = 0.02  # requests sent at once all miss, as at Anthropic
        kb = Path(tmp) / "kb.jsonl"
        kb.write_text(json.dumps({"title": "Varn river survey", "text": doc}) + "\n")
        home = Path(tmp) / "home"
        anthropic = (f'{{id: "anthropic:messages:claude-sonnet-4-5", config: {{apiBaseUrl: "{vendors.url}", '
                     f'apiKey: sk-ant-bench%s}}}}')
        graders = [("anthropic, cache: false", anthropic % ", cache: false"), ("anthropic", anthropic % ""),
                   ("openai", f'{{id: "openai:chat:gpt-4o", config: {{apiBaseUrl: "{openai_server.url}"}}}}')]
        runs = []
        for method in ("facts-grounding", "factscore"):
            for label, grader in graders:
                if "cache: false" in label and not takes_cache_key:
                    continue
                vendors.requests.clear()
                vendors.anthropic_cache = AnthropicCache()
                openai_server.reset()
                cfg = Path(tmp) / "c.yaml"
                cfg.write_text(config(method, grader, doc, answer, kb))
                out = Path(tmp) / "r.json"
                m = factcli(["eval", "-c", cfg, "-o", out, "--no-cache", "--no-table", "--no-progress-bar",
                             "-j", args.j], home, src=src)
                comp = json.loads(out.read_text())["results"]["results"][0]["gradingResult"]["componentResults"][0]
                if (comp.get("metadata") or {}).get("graderError"):
                    raise SystemExit(f"{method} {label}: {comp['reason']}\n{m.stderr[-2000:]}")
                run = {"method": method, "grader": label}
                if label == "openai":
                    bodies = [r["json"] for r in openai_server.requests if "chat/completions" in r["path"]]
                    total, cached = sum(len(words(b)) for b in bodies), sum(openai_server.prefix_cache.hits)
                    run["note"] = f"{total:,} prompt tokens, {cached:,} of them cached"
                else:
                    bodies = vendors.by_path("/v1/messages")
                    usages = vendors.anthropic_cache.usages
                    plain = sum(u["input_tokens"] for u in usages)
                    writes = sum(u["cache_creation_input_tokens"] for u in usages)
                    reads = sum(u["cache_read_input_tokens"] for u in usages)
                    run["spend"] = sum(map(spend, usages))
                    run["note"] = (f"input {plain:,} + writes {writes:,} + reads {reads:,} = "
                                   f"{plain + writes + reads:,} tokens; spend {run['spend']:,.1f} full-price tokens")
                steps = step_calls(method, bodies)
                runs.append({**run, "calls": len(bodies), "lead": shared_lead(steps), "steps": len(steps)})
        print(f"{'method':16} {'grader':24} {'calls':>5} {'shared lead':>11}  tokens")
        for r in runs:
            print(f"{r['method']:16} {r['grader']:24} {r['calls']:5} {r['lead']:>6} ({r['steps']:2})  {r['note']}")
        print("shared lead: leading tokens common to the repeating step's calls (their number in brackets)")
        for method in ("facts-grounding", "factscore"):
            spent = {r["grader"]: r["spend"] for r in runs if r["method"] == method and "spend" in r}
            if "anthropic, cache: false" in spent:
                off, on = spent["anthropic, cache: false"], spent["anthropic"]
                print(f"{method}: input spend with cache marks {on:,.1f} vs {off:,.1f} without: "
                      f"{100 * (1 - on / off):.0f}% less")


if __name__ == "__main__":
    main()
