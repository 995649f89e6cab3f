"""`factcli view`: the first screen of a stored 100,000-row run (25,000 tests x 4 columns), with
and without filters and on a late page. Target: under 1 s each. (This was a timed test in
tests/test_view.py; the test now checks the output only.)

    python benchmarks/view.py --repeats 5
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, factcli, median, spread  # noqa: E402

sys.path.insert(0, str(ROOT))


def make_big_run(db: Path, tests: int, columns: int) -> str:
    """A finished run written straight into the store (an eval of 100,000 rows takes a while)."""
    from factcli.metrics import ColumnMetrics
    from factcli.records import metrics_to_json
    from factcli.store import RESULT_FIELDS, Store

    run_id = "eval-20990101T000000-bigrun"
    with Store.open(db, create=True) as store:
        store.insert_run({"id": run_id, "created_at": "2099-01-01T00:00:00.000+00:00", "status": "complete",
                          "finished_at": "2099-01-01T01:00:00.000+00:00", "description": "big",
                          "config_files_json": "[]", "total_steps": tests * columns,
                          "successes": tests * columns // 2, "failures": tests * columns // 2, "errors": 0,
                          "duration_ms": 3_600_000, "graders_json": "[]"})
        metrics = []
        for c in range(columns):
            m = ColumnMetrics(test_pass=tests // 2, test_fail=tests - tests // 2, rows=tests, score=tests / 2)
            m.named_scores, m.named_weights = {"acc": tests / 2}, {"acc": float(tests)}
            metrics.append(metrics_to_json(m))
        store.set_columns(run_id, [{"prompt_idx": c, "provider_idx": c, "provider_id": f"openai:chat:model-{c}",
                                    "provider_label": None, "prompt_label": "Answer: {{q}}",
                                    "prompt_raw": "Answer: {{q}}", "prompt_id": "x", "metrics_json": metrics[c]}
                                   for c in range(columns)])
        text = "The answer is " + "lorem ipsum dolor sit amet " * 20
        grading = json.dumps({"pass": True, "score": 1, "reason": "ok", "componentResults": [
            {"pass": True, "score": 1, "reason": "ok", "assertion": {"type": "contains", "value": "answer"}}]})
        rows = ((run_id, t, c, 0, c, t * columns + c, f"k{t}", f"test number {t}", t % 2, t % 2 ^ 1, float(t % 2),
                 None if t % 2 else "Expected output to contain 'answer'", f"{text} {t}", 0, '{"acc": 1}', grading,
                 12.5, 10, 20, 30, 0, 0.0001, 0, json.dumps({"q": f"question {t}"}), f"Answer: question {t}", "{}", "")
                for t in range(tests) for c in range(columns))
        store.conn.executemany(f"INSERT INTO results ({', '.join(RESULT_FIELDS)}) VALUES "
                               f"({', '.join('?' * len(RESULT_FIELDS))})", rows)
        store.commit()
    return run_id


CASES = {"first page": [], "--failures": ["--failures"], "--filter (last test)": ["--filter", "question 24999"],
         "--page 400": ["--page", "400"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--src", help="run the factcli of this source tree (default: this checkout)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "big.db"
        make_big_run(db, tests=25_000, columns=4)
        factcli(["view", "--db", db], Path(tmp) / "home", src=args.src)  # warm: bytecode, page cache
        walls: dict = {name: [] for name in CASES}
        cpus: dict = {name: [] for name in CASES}
        for _ in range(args.repeats):
            for name, extra in CASES.items():
                m = factcli(["view", "--db", db, *extra], Path(tmp) / "home", src=args.src)
                assert m.returncode == 0 and "Rows: 100000/100000" in m.stdout, m.stdout[-800:]
                walls[name].append(m.wall)
                cpus[name].append(m.cpu)
        print(f"100,000 stored rows; medians of {args.repeats} runs")
        print("| factcli view | wall s (median) | min-max | CPU s |")
        print("|---|---|---|---|")
        for name in CASES:
            print(f"| {name} | {median(walls[name]):.2f} | {spread(walls[name])} | {median(cpus[name]):.2f} |")


if __name__ == "__main__":
    main()
