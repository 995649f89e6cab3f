"""factcli's stored echo run against the plain-Python floor, measured in the same run.

The floor is the least a program can do for the same rows: read the tests CSV, render the prompt,
check `contains`, `regex` and `not-icontains`, encode each row as JSON and insert it into SQLite in
WAL mode, one transaction per 500 rows. factcli runs the same rows from the same CSV (the `echo`
provider, the same three assertions), stored, end to end (`python -m factcli eval`, interpreter
start-up included). Runs alternate (floor, factcli for each N, ...) so that load on a shared
machine hits both, and every figure is quoted as a ratio to the floor of the same run.

    python benchmarks/floor.py --n 10000 100000 --repeats 3
    python benchmarks/floor.py --n 10000 --repeats 3 --src /tmp/before --src .   # trees side by side

Goals (issue 30): 10,000 rows at most 3x the floor; 100,000 rows at most 11x the 10,000-row time,
peak RSS at most 200 MB.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import factcli, machine, median, run, spread, warm_home, write_yaml  # noqa: E402

ASSERTIONS = [
    {"type": "contains", "value": "Answer"},
    {"type": "regex", "value": r"question \d+"},
    {"type": "not-icontains", "value": "ZEBRA"},
]

# The floor: the same work with nothing else (no config language, no scoring registry, no secrets).
FLOOR = r"""
import csv, json, re, sqlite3, sys, time
from datetime import datetime, timezone

rows_csv, db_path = sys.argv[1], sys.argv[2]
conn = sqlite3.connect(db_path)
conn.execute("PRAGMA journal_mode = WAL")
conn.execute("PRAGMA synchronous = NORMAL")
conn.execute("CREATE TABLE IF NOT EXISTS results (id INTEGER PRIMARY KEY, test_idx INTEGER, output TEXT, "
             "success INTEGER, grading_json TEXT, vars_json TEXT, created_at TEXT)")
pattern = re.compile(r"question \d+")
batch = []
passed = 0
with open(rows_csv, newline="", encoding="utf-8") as fh:
    for i, row in enumerate(csv.DictReader(fh)):
        output = "Answer: " + row["q"]  # render; the echo provider answers with the prompt
        checks = ["Answer" in output, pattern.search(output) is not None, "zebra" not in output.lower()]
        ok = all(checks)
        passed += ok
        grading = {"pass": ok, "score": 1.0 if ok else 0.0,
                   "componentResults": [{"pass": c, "score": 1.0 if c else 0.0} for c in checks]}
        batch.append((i, output, int(ok), json.dumps(grading), json.dumps(row),
                      datetime.now(timezone.utc).isoformat()))
        if len(batch) == 500:
            with conn:
                conn.executemany("INSERT INTO results (test_idx, output, success, grading_json, vars_json, "
                                 "created_at) VALUES (?, ?, ?, ?, ?, ?)", batch)
            batch = []
if batch:
    with conn:
        conn.executemany("INSERT INTO results (test_idx, output, success, grading_json, vars_json, created_at) "
                         "VALUES (?, ?, ?, ?, ?, ?)", batch)
print(f"{passed}/{i + 1} passed")
"""


def tests_csv(path: Path, n: int) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["q"])
        w.writerows([f"question {i}"] for i in range(n))
    return path


def csv_config(path: Path, rows: Path, n: int) -> Path:
    return write_yaml(path, {
        "description": f"{n} echo rows from a CSV",
        "prompts": ["Answer: {{q}}"],
        "providers": ["echo"],
        "defaultTest": {"assert": ASSERTIONS},
        "tests": f"file://{rows}",
    })


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[10_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--src", action="append", help="run the factcli of this source tree (default: this "
                    "checkout); repeat to measure several trees in the same run")
    ap.add_argument("--profile", help="write one cProfile run of factcli (the first --n) here instead of timing")
    args = ap.parse_args()
    srcs = args.src or [None]
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        if args.profile:
            n = args.n[0]
            cfg = csv_config(t / "c.yaml", tests_csv(t / "rows.csv", n), n)
            factcli(["eval", "-c", cfg, "--no-table", "--no-progress-bar"], warm_home(t / "home", srcs[0]),
                    src=srcs[0], python_flags=("-m", "cProfile", "-o", args.profile))
            print(f"wrote {args.profile}")
            return
        results: dict = {}
        for n in args.n:
            rows = tests_csv(t / f"rows{n}.csv", n)
            cfg = csv_config(t / f"c{n}.yaml", rows, n)
            for i in range(args.repeats):
                db = t / f"floor{n}-{i}.db"
                f = run([sys.executable, "-c", FLOOR, str(rows), str(db)])
                assert f"{n}/{n} passed" in f.stdout, f.stdout
                results.setdefault(("floor", n), []).append(f)
                for j, src in enumerate(srcs):
                    m = factcli(["eval", "-c", cfg, "--no-table", "--no-progress-bar"],
                                warm_home(t / f"home{j}", src), src=src)
                    assert m.returncode == 0 and f"{n}/{n} rows" in m.stdout, (m.stdout[-500:], m.stderr[-2000:])
                    results.setdefault((src, n), []).append(m)
        print(f"medians of {args.repeats} runs, alternating; min-max in brackets")
        print("| what | rows | wall s | CPU s | peak RSS MB | wall / floor (same N) | wall / same tree at "
              f"{args.n[0]:,} rows |")
        print("|---|---|---|---|---|---|---|")
        for n in args.n:
            floor = median([m.wall for m in results[("floor", n)]])
            for who in ["floor", *srcs]:
                ms = results[(who, n)]
                wall, cpu, rss = median([m.wall for m in ms]), median([m.cpu for m in ms]), \
                    median([m.rss_mb for m in ms])
                base = median([m.wall for m in results[(who, args.n[0])]])
                name = "plain-Python floor" if who == "floor" else f"factcli ({who or 'this checkout'})"
                print(f"| {name} | {n:,} | {wall:.2f} ({spread([m.wall for m in ms])}) | {cpu:.2f} | {rss:.0f} | "
                      f"{wall / floor:.2f}x | {wall / base:.2f}x |")


if __name__ == "__main__":
    main()
