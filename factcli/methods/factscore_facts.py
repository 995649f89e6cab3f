"""The two grader steps of `factscore` and the checks on their replies: decomposing a response's
sentences into atomic facts, and having a judge verify each fact against the passages retrieved for it,
in batches, with the union of the batch's passages shown once and numbered. A verification reply must
give one verdict per fact, in order, citing only passages that were shown; anything else is a JudgeError
(a grading error upstream), never a guess. The step prompts arrive resolved: `factscore` owns the
config, the knowledge source, the score and the flow that calls these steps.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from factcli.methods.claims import (
    JudgeCall,
    JudgeError,
    aligned_verdicts,
    ask_json,
    gather_calls,
    numbered,
    string_list,
)
from factcli.scoring.content import RESTATED, Sent, echoed, listed
from factcli.scoring.replies import Flag, Int, ListOf, Maybe, Obj, Reply, Text
from factcli.stats.text import Passage
from factcli.types import ProviderSpec

SUPPORTED, NOT_SUPPORTED = "SUPPORTED", "NOT_SUPPORTED"
VERDICTS = {"TRUE": SUPPORTED, "FALSE": NOT_SUPPORTED, "SUPPORTED": SUPPORTED, "NOT_SUPPORTED": NOT_SUPPORTED,
            "NOT SUPPORTED": NOT_SUPPORTED, "NOT-SUPPORTED": NOT_SUPPORTED, "UNSUPPORTED": NOT_SUPPORTED,
            "1": SUPPORTED, "0": NOT_SUPPORTED}
# caps that follow the input, as factual-correctness's (methods/factual_correctness.py); what they must
# contain (scoring/content.py): facts that come from the sentences decomposed (or the topic and question), and
# verdicts that echo the facts sent, in order (a verdict naming another fact: the list is out of order)
FACTS_REPLY = Reply("facts", Obj(facts=ListOf(Text())), 2048, types=("factscore",), per_item=3, base=64,
                    content=listed("facts", "fact", RESTATED))
FACT_VERDICTS_REPLY = Reply("fact_verdicts", Obj(verdicts=ListOf(Obj(
    fact=Text(), verdict=Flag(), reason=Text(), evidence=Maybe(Int())))), 2048, types=("factscore",),
    per_item=96, base=32, content=echoed("verdicts", "fact", "fact"))


CHUNK_WORDS = 400  # words of response a decomposition call: 3·400 + 64 tokens stays inside the 2,048 cap


def judge_name(spec: ProviderSpec) -> str:
    """The judge a fact's verdict names: its label, else its id (not the panel's numbered name)."""
    return spec.label or spec.id


async def decompose(ctx, spec: ProviderSpec, template: Any, sentences: list[str], mode: str, topic: str,
                    call: JudgeCall, sem: asyncio.Semaphore) -> list[dict]:
    """The response's atomic facts, from one call for all `sentences` or (`mode` "sentence") one per
    sentence, each fact then remembering its sentence's number."""

    async def one(batch: list[str], sentence: str, step: str, sub: JudgeCall) -> list[str]:
        variables = {**ctx.vars, "topic": topic, "response": ctx.output_text,
                     "sentences": json.dumps(batch, ensure_ascii=False), "sentences_numbered": numbered(batch),
                     "sentence": sentence}
        async with sem:
            obj = await ask_json(ctx, spec, template, variables, sub, step, FACTS_REPLY,
                                 sum(len(s.split()) for s in batch),
                                 sent=Sent.of("sentences it was asked to decompose", *batch, topic, ctx.prompt or ""))
        return string_list(obj, "facts", step, sub.replies[-1]["reply"])

    if mode == "sentence":
        lists = await gather_calls(call, *(
            lambda sub, i=i, sent=sent: one([sent], sent, f"decompose sentence {i + 1}", sub)
            for i, sent in enumerate(sentences)))
        return [{"text": f, "sentence": i + 1} for i, facts in enumerate(lists) for f in facts]
    chunks = _chunks(sentences, CHUNK_WORDS)
    if len(chunks) == 1:
        return [{"text": f} for f in await one(sentences, "", "decompose", call)]
    lists = await gather_calls(call, *(
        lambda sub, i=i, chunk=chunk: one(chunk, "", f"decompose part {i + 1}/{len(chunks)}", sub)
        for i, chunk in enumerate(chunks)))
    return [{"text": f} for facts in lists for f in facts]


def _chunks(sentences: list[str], words: int) -> list[list[str]]:
    """Consecutive sentences in groups of at most `words` words (a longer sentence alone): the facts of a
    group fit the decomposition step's cap (about 3 tokens a word of text)."""
    out: list[list[str]] = [[]]
    count = 0
    for s in sentences:
        n = len(s.split())
        if out[-1] and count + n > words:
            out.append([])
            count = 0
        out[-1].append(s)
        count += n
    return out


def _evidence_numbers(raw: Any, n_passages: int, i: int, step: str) -> list[int]:
    """The passage numbers a verdict cites; none is fine, a number that was not shown is not."""
    if raw is None or raw is False or raw == "" or raw == []:
        return []
    items = raw if isinstance(raw, list) else [raw]
    out = []
    for item in items:
        if isinstance(item, bool):
            raise JudgeError(f"{step}: verdict {i + 1} has evidence {raw!r}, expected a passage number or null")
        if isinstance(item, str):
            stripped = item.strip().strip("[]").strip()
            if stripped.lower() in ("", "null", "none", "n/a"):
                continue
            if not stripped.isdigit():
                raise JudgeError(f"{step}: verdict {i + 1} has evidence {raw!r}, expected a passage number or null")
            item = int(stripped)
        if isinstance(item, float) and item.is_integer():
            item = int(item)
        if not isinstance(item, int):
            raise JudgeError(f"{step}: verdict {i + 1} has evidence {raw!r}, expected a passage number or null")
        if item == 0:
            continue
        if not 1 <= item <= n_passages:
            raise JudgeError(f"{step}: verdict {i + 1} cites passage {item}, but passages 1-{n_passages} were shown")
        out.append(item)
    return out


def _passage_block(passages: list[Passage]) -> tuple[str, str]:
    text = "\n\n".join(f"[{n}] Title: {p.title}\n{p.text}" for n, p in enumerate(passages, 1))
    as_json = json.dumps([{"passage": n, "title": p.title, "text": p.text} for n, p in enumerate(passages, 1)],
                         ensure_ascii=False)
    return text, as_json


def _shown_passages(groups: list[list[Passage]]) -> list[Passage]:
    """The union of the facts' passages, once each: documents in order of first retrieval, and
    passages in document order within each."""
    titles: dict[str, None] = {}
    seen: dict[str, Passage] = {}
    for passages in groups:
        for p in passages:
            titles.setdefault(p.title, None)
            seen.setdefault(p.id, p)
    order = {t: i for i, t in enumerate(titles)}
    return sorted(seen.values(), key=lambda p: (order[p.title], p.index))


async def verify(ctx, spec: ProviderSpec, template: Any, facts: list[dict], retrieved: list[list[Passage]],
                 batch_size: int, topic: str, call: JudgeCall, sem: asyncio.Semaphore,
                 best_last: bool = False) -> list[dict]:
    """One judge's verdict on every fact against that fact's `retrieved` passages, in calls of
    `batch_size` facts (0: all in one call); the reply of each call must line up with its facts.
    `best_last` (one fact a call): its passages in reverse rank order, the best nearest the question, as
    FActScore's reference code shows them."""
    size = batch_size or len(facts)
    batches = [list(range(i, min(i + size, len(facts)))) for i in range(0, len(facts), size)]

    async def one(indices: list[int], b: int, call: JudgeCall) -> list[dict]:
        step = "verify" if len(batches) == 1 else f"verify batch {b + 1}/{len(batches)}"
        texts = [facts[i]["text"] for i in indices]
        if best_last and len(indices) == 1:
            shown = list(reversed(retrieved[indices[0]]))
        else:
            shown = _shown_passages([retrieved[i] for i in indices])
        block, as_json = _passage_block(shown)
        variables = {**ctx.vars, "topic": topic, "passages": block, "passages_json": as_json,
                     "facts": json.dumps(texts, ensure_ascii=False), "facts_numbered": numbered(texts)}
        async with sem:
            obj = await ask_json(ctx, spec, template, variables, call, step, FACT_VERDICTS_REPLY, len(texts),
                                 sent=Sent.of("passages", block, items=texts))
        raw = call.replies[-1]["reply"]  # (the batch's own JudgeCall)
        try:
            verdicts = aligned_verdicts(obj, texts, VERDICTS, step)
            cited = [_evidence_numbers(v.get("evidence"), len(shown), i, step)
                     for i, v in enumerate(obj["verdicts"])]
        except JudgeError as exc:
            raise JudgeError(str(exc), raw) from None
        out = []
        for i, v, nums in zip(indices, verdicts, cited):
            passages = [shown[n - 1] for n in nums]
            entry = {
                "text": facts[i]["text"], "verdict": v["verdict"], "supported": v["verdict"] == SUPPORTED,
                "reason": v["reason"],
                "evidence": "\n\n".join(p.text for p in passages) or None,
                "evidenceId": ", ".join(p.id for p in passages) or None,
                "retrieved": [p.id for p in retrieved[i]],
                "judge": judge_name(spec),
            }
            if "sentence" in facts[i]:
                entry["sentence"] = facts[i]["sentence"]
            out.append(entry)
        return out

    parts = await gather_calls(call, *(lambda sub, ix=ix, b=b: one(ix, b, sub) for b, ix in enumerate(batches)))
    return [e for part in parts for e in part]
