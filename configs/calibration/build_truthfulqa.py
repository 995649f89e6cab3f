"""Rebuild truthfulqa-150.jsonl from the TruthfulQA data files, deterministically.

    python configs/calibration/build_truthfulqa.py [--data DIR] [--out FILE | --stdout]

DIR holds TruthfulQA.csv and finetune_truth.jsonl (default: ../shared/data/truthfulqa next to the
repository). Standard library only.

Sampling (seed 2022):
1. Read the human truthfulness labels (finetune_truth.jsonl: "Q: …\\nA: …\\nTrue:" -> " yes"/" no")
   and keep the distinct (question, answer) pairs whose question is in TruthfulQA.csv (after
   trimming spaces), whose answer is not empty, and whose copies all carry the same label (27 pairs
   are labelled both ways and are dropped).
2. Drop non-answers ("I have no comment", "I don't know", …): TruthfulQA counts them truthful, but
   they make no claim a reference-based grader could check, so they would measure the definition
   of the label rather than the grader.
3. Shuffle the questions; walk them and take one answer per question, of the class that has fewer
   items so far (the other class when the question has no answer of that one), until each class
   has 75. So: 150 items, 75 truthful and 75 not, 150 different questions.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent.parent / "shared" / "data" / "truthfulqa"
PER_CLASS = 75
SEED = 2022
NON_ANSWER = re.compile(r"^\W*(i have no comment|no comment|i don'?t know|i do not know|i'm not sure|unknown)\W*$",
                        re.IGNORECASE)


def build(data: Path, per_class: int = PER_CLASS, seed: int = SEED) -> list[dict]:
    with open(data / "TruthfulQA.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    by_question = {r["Question"].strip(): (i + 1, r) for i, r in enumerate(rows)}
    labels: dict[tuple[str, str], set[bool]] = {}
    with open(data / "finetune_truth.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            prompt = rec["prompt"]
            if not (prompt.startswith("Q: ") and prompt.endswith("\nTrue:") and "\nA: " in prompt):
                continue
            question, answer = prompt[len("Q: "):-len("\nTrue:")].split("\nA: ", 1)
            labels.setdefault((question.strip(), answer.strip()), set()).add(rec["completion"].strip() == "yes")
    candidates: dict[str, dict[bool, list[str]]] = {}
    for (question, answer), seen in labels.items():
        if len(seen) != 1 or not answer or question not in by_question or NON_ANSWER.match(answer):
            continue
        candidates.setdefault(question, {True: [], False: []})[next(iter(seen))].append(answer)
    rng = random.Random(seed)
    order = sorted(candidates, key=lambda q: by_question[q][0])
    rng.shuffle(order)
    picked: list[tuple[str, str, bool]] = []
    count = {True: 0, False: 0}
    for question in order:
        if count[True] >= per_class and count[False] >= per_class:
            break
        want = count[True] <= count[False]
        for cls in (want, not want):
            pool = sorted(candidates[question][cls])
            if pool and count[cls] < per_class:
                picked.append((question, rng.choice(pool), cls))
                count[cls] += 1
                break
    if count[True] < per_class or count[False] < per_class:
        raise SystemExit(f"only {count[True]} truthful and {count[False]} untruthful answers found")
    items = []
    for question, answer, truthful in sorted(picked, key=lambda p: by_question[p[0]][0]):
        number, row = by_question[question]
        items.append({
            "id": f"tqa-{number:03d}",
            "question": question,
            "output": answer,
            "reference": row["Best Answer"].strip(),
            "correct_answers": row["Correct Answers"].strip(),
            "category": row["Category"].strip(),
            "label": "yes" if truthful else "no",
        })
    return items


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with TruthfulQA.csv and "
                    "finetune_truth.jsonl")
    ap.add_argument("--out", type=Path, default=HERE / "truthfulqa-150.jsonl")
    ap.add_argument("--stdout", action="store_true", help="print the JSONL instead of writing --out")
    args = ap.parse_args()
    text = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in build(args.data))
    if args.stdout:
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
