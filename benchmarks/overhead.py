"""factcli's own overhead: N rows through the `echo` provider (no network), three deterministic
assertions each, every row stored in SQLite. Target: 10,000 rows in under 5 s in total.

    python benchmarks/overhead.py --n 10000 --repeats 5
    python benchmarks/overhead.py --n 10000 --profile /tmp/overhead.prof   # one cProfile run
    python benchmarks/overhead.py --src /tmp/before --src .                 # trees, runs interleaved

Reports the median wall time of the whole command (interpreter start-up, config load, run, store,
summary), its CPU time, and the per-row figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import echo_config, factcli, median, spread, warm_home  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--src", action="append", help="run the factcli of this source tree (default: this "
                    "checkout); repeat to compare trees, their runs interleaved so load changes hit both")
    ap.add_argument("--profile", help="write one cProfile run here instead of timing")
    ap.add_argument("--no-write", action="store_true", help="do not store the run (isolates the store's cost)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = echo_config(Path(tmp) / "echo.yaml", args.n)
        cmd = ["eval", "-c", cfg, "--no-table", "--no-progress-bar"] + (["--no-write"] if args.no_write else [])
        srcs = args.src or [None]
        if args.profile:
            flags = ("-m", "cProfile", "-o", args.profile)
            factcli(cmd, Path(tmp) / "home", src=srcs[0], python_flags=flags)
            print(f"wrote {args.profile}")
            return
        walls: dict = {s: [] for s in srcs}
        cpus: dict = {s: [] for s in srcs}
        for i in range(args.repeats):
            for j, src in enumerate(srcs):
                m = factcli(cmd, warm_home(Path(tmp) / f"home{j}", src), src=src)
                assert m.returncode == 0 and f"{args.n}/{args.n} rows" in m.stdout, m.stdout[-500:]
                walls[src].append(m.wall)
                cpus[src].append(m.cpu)
        print("| tree | rows | stored | wall s (median) | wall s (min-max) | CPU s (median) | ms per row (wall) |")
        print("|---|---|---|---|---|---|---|")
        for src in srcs:
            w, c = median(walls[src]), median(cpus[src])
            print(f"| {src or 'this checkout'} | {args.n} | {'no' if args.no_write else 'yes'} | {w:.2f} | "
                  f"{spread(walls[src])} | {c:.2f} | {1000 * w / args.n:.3f} |")

if __name__ == "__main__":
    main()
