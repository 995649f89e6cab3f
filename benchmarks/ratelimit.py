"""A rate-limited endpoint: factcli with `rpm` set to the server's limit, and without it (adaptive
concurrency), against the ideal time for that limit.

The fake server answers 429 to any request beyond R per second (a sliding one-second window, with
or without Retry-After). The ideal is N / R seconds: no client can finish sooner without a 429.
Each configuration runs `--repeats` times; medians, with the 429s the server answered.

    python benchmarks/ratelimit.py --n 200 --rate 20 --j 16 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import FakeServer, factcli, median, openai_config, spread, warm_home  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rate", type=int, default=20, help="requests per second the server allows")
    ap.add_argument("--j", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--src", help="run the factcli of this source tree (default: this checkout)")
    args = ap.parse_args()
    ideal = args.n / args.rate
    print(f"N = {args.n}, server limit {args.rate} requests/s, -j {args.j}; ideal {ideal:.1f} s; "
          f"medians of {args.repeats} runs")
    print("| client | Retry-After | wall s (median) | min-max | ratio to ideal | 429s answered (median) |")
    print("|---|---|---|---|---|---|")
    cases = [("rpm at the limit", None, {"rpm": args.rate * 60}),
             ("adaptive (no rpm)", None, {}),
             ("adaptive (no rpm)", "1", {})]
    with tempfile.TemporaryDirectory() as tmp:
        home = warm_home(Path(tmp) / "home", src=args.src)
        for label, retry_after, provider_config in cases:
            limit = f"{args.rate}/1" + (f"/{retry_after}" if retry_after else "")
            walls, limited = [], []
            for i in range(args.repeats):
                with FakeServer(rate_limit=limit) as server:
                    cfg = openai_config(Path(tmp) / f"c{i}.yaml", server.url, args.n, **provider_config)
                    m = factcli(["eval", "-c", cfg, "-j", args.j, "--no-cache", "--no-table", "--no-progress-bar"],
                                home, src=args.src, env={**os.environ, "FACTCLI_MAX_RETRIES": "50"})
                if "Successes: " + str(args.n) not in m.stdout:
                    raise SystemExit(f"not every row passed:\n{m.stdout[-2000:]}")
                walls.append(m.wall)
                limited.append(_throttled(m.stdout))
            print(f"| {label} | {retry_after or 'none'} | {median(walls):.2f} | {spread(walls)} | "
                  f"{median(walls) / ideal:.2f} | {median(limited):g} |")


def _throttled(stdout: str) -> int:
    """The 429s factcli was answered, from its summary's Throttled line (0 when it printed none)."""
    m = re.search(r"asked to slow down (\d+) times", " ".join(stdout.split()))
    return int(m.group(1)) if m else 0


if __name__ == "__main__":
    main()
