"""Cache: re-running N rows that are all in the response cache (target: 2,000 rows < 2 s), and
which provider libraries such a run imports (target: none of litellm, openai).

The first run fills the cache against the fake server; the server is then stopped, so a re-run
that missed the cache would fail instead of quietly calling it.

    python benchmarks/cache.py --n 2000 --repeats 5
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import FakeServer, factcli, median, openai_config, spread  # noqa: E402

WATCHED = ("litellm", "openai", "httpx", "aiohttp", "factcli.providers.openai_provider",
           "factcli.providers.litellm_provider")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--src", help="run the factcli of this source tree (default: this checkout)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        with FakeServer(0.0) as server:
            cfg = openai_config(Path(tmp) / "c.yaml", server.url, args.n)
            first = factcli(["eval", "-c", cfg, "-j", "64", "--no-table", "--no-progress-bar"], home, src=args.src)
            assert f"{args.n}/{args.n} rows" in first.stdout and "Errors: 0" in first.stdout, first.stdout[-800:]
        cmd = ["eval", "-c", cfg, "-j", "64", "--no-table", "--no-progress-bar"]
        walls, cpus = [], []
        for _ in range(args.repeats):
            m = factcli(cmd, home, src=args.src)
            assert "Errors: 0" in m.stdout and f"{args.n}/{args.n} rows" in m.stdout, m.stdout[-800:]
            walls.append(m.wall)
            cpus.append(m.cpu)
        m = factcli(cmd, home, src=args.src, python_flags=("-X", "importtime"))
        imported = {line.split("|")[2].strip() for line in m.stderr.splitlines() if line.startswith("import time:")}
        print(f"first run (filling the cache, fake server at 0 ms): {first.wall:.2f} s")
        print("| cached rows | wall s (median) | min-max | CPU s | ms per row |")
        print("|---|---|---|---|---|")
        print(f"| {args.n} | {median(walls):.2f} | {spread(walls)} | {median(cpus):.2f} | "
              f"{1000 * median(walls) / args.n:.3f} |")
        for name in WATCHED:
            print(f"imports {name}: {'yes' if name in imported else 'no'}")


if __name__ == "__main__":
    main()
