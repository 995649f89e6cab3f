"""The factuality methods and what they share: claims and judge calls, factual-correctness, FActScore
with its knowledge sources, FACTS Grounding, SimpleQA, their prompts and per-column method reports."""
