"""Memory: peak RSS of `factcli eval` over N echo rows (three assertions each, stored), read from
the process's own rusage (ru_maxrss). Target: 100,000 rows under 300 MB.

    python benchmarks/memory.py --n 100000 --repeats 3
    python benchmarks/memory.py --n 100000 --repeats 1 --output json      # and -o results.json
    python benchmarks/memory.py --n 100000 --repeats 1 --export json      # factcli export of the run
    python benchmarks/memory.py --n 100000 --repeats 1 --no-write         # rows kept in memory

Linux starts a child's ru_maxrss at its parent's RSS (exec records the old address space's high
water mark), so this script keeps itself small: the configs are written by a child process, and
`python -c pass` is measured the same way as a check (it must stay near its ~10 MB).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import factcli, median, run, warm_home  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--src", help="run the factcli of this source tree (default: this checkout)")
    ap.add_argument("--output", metavar="EXT", action="append", default=[],
                    help="also write -o results.EXT (json, jsonl, csv, ...); repeatable")
    ap.add_argument("--table", action="store_true", help="show the results table (default: --no-table)")
    ap.add_argument("--no-write", action="store_true", help="do not store the run (every row stays in memory)")
    ap.add_argument("--export", metavar="EXT", help="measure `factcli export latest -o results.EXT` of the run "
                    "instead of the eval")
    args = ap.parse_args()
    extra = ([] if args.table else ["--no-table"]) + (["--no-write"] if args.no_write else [])
    print(f"eval options: {' '.join(extra + [f'-o results.{e}' for e in args.output]) or '(none)'}"
          + (f"; measuring: factcli export latest -o results.{args.export}" if args.export else ""))
    base = run([sys.executable, "-c", "import factcli.cli"], src=args.src)
    print(f"python importing factcli.cli: {base.rss_mb:.0f} MB")
    print("| rows | peak RSS MB (median) | all runs | wall s (median) | config file MB | `python -c pass` MB |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.n:
            cfg = Path(tmp) / f"echo{n}.yaml"
            subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
                            "from common import echo_config; echo_config(Path(sys.argv[2]), int(sys.argv[3]))",
                            str(Path(__file__).resolve().parent), str(cfg), str(n)], check=True)
            floor = run([sys.executable, "-c", "pass"]).rss_mb
            rss, walls = [], []
            for i in range(args.repeats):
                home = warm_home(Path(tmp) / f"home-{n}-{i}", args.src)
                outs = [a for e in args.output for a in ("-o", Path(tmp) / f"results-{i}.{e}")]
                m = factcli(["eval", "-c", cfg, "--no-progress-bar", *extra, *outs], home, src=args.src)
                assert f"{n}/{n} rows" in m.stdout, m.stdout[-800:]
                if args.export:
                    m = factcli(["export", "latest", "-o", Path(tmp) / f"export-{i}.{args.export}"], home, src=args.src)
                rss.append(m.rss_mb)
                walls.append(m.wall)
            print(f"| {n} | {median(rss):.0f} | {', '.join(f'{r:.0f}' for r in rss)} | {median(walls):.1f} | "
                  f"{cfg.stat().st_size / 1e6:.1f} | {floor:.0f} |", flush=True)


if __name__ == "__main__":
    main()
