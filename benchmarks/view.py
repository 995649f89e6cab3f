"""`factcli view`: the first screen of a stored 100,000-row run (25,000 tests x 4 columns), with
and without filters and on a late page. Target: under 1 s each. (This was a timed test in
tests/test_view.py; the test now checks the output only.)

    python benchmarks/view.py --repeats 5
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, factcli, median, spread  # noqa: E402

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from test_view import make_big_run  # noqa: E402  (the test builds the same stored run)


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
