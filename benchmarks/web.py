"""`factcli view --web`: time to the first screen of a stored 100,000-row run (25,000 tests x 4
columns), served by the real command (`python -m factcli view --web --no-open` in its own process)
and fetched over HTTP: the run page as it first opens, with filters, a late page, and a cell.
Target: the first screen in 0.5 s or less. Also the time from starting the command to the first
page served (interpreter start-up, imports, the store opened, one page rendered).

    python benchmarks/web.py --repeats 7
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, free_port, median, spread  # noqa: E402

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from test_view import make_big_run  # noqa: E402  (the test builds the same stored run)

CASES = {"run page (first screen)": "", "failures": "?failures=1", "search (last test)": "?q=question+24999",
         "column 2, failures": "?column=2&failures=1", "page 400": "?page=400"}


def fetch(url: str) -> tuple[float, str]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        body = r.read().decode()
    return time.perf_counter() - start, body


def wait_up(url: str) -> None:
    """The command prints its URL before it listens: retry until it answers."""
    while True:
        try:
            fetch(url)
            return
        except OSError:
            time.sleep(0.01)


def start(db: Path, port: int, home: Path, src: str | None) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "FACTCLI_HOME": str(home), "PYTHONPATH": src or str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "factcli", "view", "--web", "--no-open", "--port", str(port),
                             "--db", str(db)], cwd=src or str(ROOT), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline()
    url = line.split(" at ")[1].split()[0]
    return proc, url


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--src", help="run the factcli of this source tree (default: this checkout)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "big.db"
        run_id = make_big_run(db, tests=25_000, columns=4)
        cold: list[float] = []
        for _ in range(3):  # from the command's start to the first page served
            t0 = time.perf_counter()
            proc, url = start(db, free_port(), Path(tmp) / "home", args.src)
            wait_up(url)
            cold.append(time.perf_counter() - t0)
            proc.terminate()
            proc.wait(10)
        proc, url = start(db, free_port(), Path(tmp) / "home", args.src)
        base = url.split("/runs/")[0]
        try:
            page = f"{base}/runs/{run_id}"
            times: dict[str, list[float]] = {name: [] for name in [*CASES, "cell (last test)"]}
            wait_up(page)  # and warm: page cache, templates compiled
            for _ in range(args.repeats):
                for name, query in CASES.items():
                    took, body = fetch(page + query)
                    assert "Rows <b>100000</b>/100000" in body, body[-500:]
                    times[name].append(took)
                took, body = fetch(f"{page}/cell/24999/3/0")
                assert "Test 24999" in body
                times["cell (last test)"].append(took)
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"100,000 stored rows; medians of {args.repeats} requests each (3 for the cold start)")
    print("| factcli view --web | wall s (median) | min-max |")
    print("|---|---|---|")
    print(f"| command start to first page served | {median(cold):.2f} | {spread(cold)} |")
    for name, walls in times.items():
        print(f"| {name} | {median(walls):.3f} | {spread(walls)} |")


if __name__ == "__main__":
    main()
