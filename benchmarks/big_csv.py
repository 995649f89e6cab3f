"""Peak RSS and wall time of `factcli eval` over a CSV of about --mb megabytes (default 1,000).

A tests file far larger than its rows, read as a stream (issue 48). Targets: `--filter-first-n 100`
under 100 MB and well under a second (the rows past 100 are never read), the whole file under 300 MB.

    python benchmarks/big_csv.py --mb 1000
    python benchmarks/big_csv.py --mb 1000 --only filtered

The CSV is written to a temporary folder (under /tmp) by a child process and deleted afterwards.
Each row is one var of --row-kb kilobytes (default 10: 100,000 rows for 1,000 MB) answered by the
echo provider with one `contains` assertion; the run is stored (the store holds every row's text).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import factcli, run, warm_home  # noqa: E402

WRITE = r"""
import sys
path, mb, row_kb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "w") as f:
    f.write("doc,__expected\n")
    size, i = 0, 0
    while size < mb * 1_000_000:
        line = f"row {i} " + ("lorem ipsum " * (row_kb * 1000 // 12)) + f",contains:row {i}\n"
        f.write(line)
        size += len(line)
        i += 1
print(i)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=1000)
    ap.add_argument("--row-kb", type=int, default=10)
    ap.add_argument("--src", help="run the factcli of this source tree (default: this checkout)")
    ap.add_argument("--only", choices=["filtered", "full"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        csv_path = Path(tmp) / "big.csv"
        rows = int(run([sys.executable, "-c", WRITE, str(csv_path), str(args.mb), str(args.row_kb)]).stdout)
        size = csv_path.stat().st_size / 1e6
        cfg = Path(tmp) / "c.yaml"
        cfg.write_text(f"prompts: ['{{{{doc}}}}']\nproviders: [echo]\ntests: file://{csv_path}\n")
        print(f"CSV: {size:.0f} MB, {rows} rows of {args.row_kb} KB")
        print("| run | peak RSS MB | wall s | rows |")
        print("|---|---|---|---|")
        cases = [("filtered", ["--filter-first-n", "100"], 100), ("full", [], rows)]
        for name, extra, n in cases:
            if args.only and name != args.only:
                continue
            home = warm_home(Path(tmp) / f"home-{name}", args.src)
            m = factcli(["eval", "-c", cfg, "--no-progress-bar", "--no-table", *extra], home, src=args.src)
            assert f"{n}/{n} rows" in m.stdout, m.stdout[-800:] + m.stderr[-800:]
            print(f"| {name} {' '.join(extra)} | {m.rss_mb:.0f} | {m.wall:.1f} | {n} |", flush=True)


if __name__ == "__main__":
    main()
