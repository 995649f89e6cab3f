"""Throughput against the physical floor: factcli vs a minimal raw aiohttp client.

Starts tests/fake_openai.py in its own process with a fixed latency, then, for each (N, -j):
- floor: a bare aiohttp client (a fresh `python` process: start-up and import included, as for
  factcli) sending the same N chat requests at the same concurrency;
- factcli: `factcli eval` as a subprocess (start-up included), no cache, no table, run stored.
Each pair is repeated (floor and factcli alternate, so load changes hit both) and the medians are
reported with the ratio to the floor and the CPU milliseconds per row of each process.

    python benchmarks/throughput.py --n 500 2000 --j 4 64 --latency 0.1 --repeats 3
    python benchmarks/throughput.py --n 50 --j 1 --latency 0.1 --repeats 3   # -j 1: 2,000 rows would take 200 s
    python benchmarks/throughput.py --n 40 --j 4 64 --graders 4 --repeats 3  # each row graded by 4 llm-rubrics

`--graders K` adds K `llm-rubric` assertions to every row, graded on the same server (a second model
name): N·(1+K) calls, each row's graders after its model call. The floor then sends the same N·(1+K)
requests at the same concurrency, with no order between them: what `-j` alone allows.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import FakeServer, factcli, median, openai_config, run, spread, warm_home, write_yaml  # noqa: E402

VERDICT = '{"pass": true, "score": 1, "reason": "fine"}'

FLOOR = """
import asyncio, sys, time
import aiohttp

async def main(url, n, j):
    sem = asyncio.Semaphore(j)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        async def one(i):
            async with sem:
                async with session.post(url + "/chat/completions", headers={"Authorization": "Bearer x"},
                                        json={"model": "m", "messages": [{"role": "user", "content": f"Q {i}"}]}) as r:
                    assert r.status == 200, r.status
                    await r.json()
        await asyncio.gather(*(one(i) for i in range(n)))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[500, 2000])
    ap.add_argument("--j", type=int, nargs="+", default=[4, 64])
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--graders", type=int, default=0, help="llm-rubric assertions per row, graded on the same "
                    "server (default 0: the model's calls alone)")
    ap.add_argument("--src", action="append", help="run the factcli of this source tree (default: this "
                    "checkout); repeat to measure several trees in the same run, interleaved")
    args = ap.parse_args()
    srcs = args.src or [None]
    print(f"latency {args.latency * 1000:g} ms; medians of {args.repeats} runs (min-max in brackets)")
    print("| N | -j | tree | ideal (s) | floor (s) | factcli (s) | ratio to floor | floor CPU ms/row | "
          "factcli CPU ms/row |")
    print("|---|---|---|---|---|---|---|---|---|")
    graders = args.graders
    with tempfile.TemporaryDirectory() as tmp, \
            FakeServer(args.latency, rules=_rules(Path(tmp)) if graders else None) as server:
        for n in args.n:
            cfg = openai_config(Path(tmp) / f"c{n}.yaml", server.url, n)
            if graders:
                _add_graders(cfg, server.url, graders)
            for j in args.j:
                floors, fcpu = [], []
                walls: dict = {s: [] for s in srcs}
                cpus: dict = {s: [] for s in srcs}
                for i in range(args.repeats):
                    f = run([sys.executable, "-c", FLOOR, server.url, str(n * (1 + graders)), str(j)])
                    floors.append(f.wall)
                    fcpu.append(f.cpu)
                    for k, src in enumerate(srcs):
                        m = factcli(["eval", "-c", cfg, "-j", j, "--no-cache", "--no-table", "--no-progress-bar"],
                                    warm_home(Path(tmp) / f"home{k}", src), src=src)
                        assert f"{n}/{n} rows" in m.stdout and "Errors: 0" in m.stdout, m.stdout[-1000:]
                        assert "grading error" not in m.stdout, m.stdout[-1000:]
                        walls[src].append(m.wall)
                        cpus[src].append(m.cpu)
                f = median(floors)
                ideal = -(-n * (1 + graders) // j) * args.latency
                for src in srcs:
                    w = median(walls[src])
                    print(f"| {n} | {j} | {src or 'this checkout'} | {ideal:.2f} | {f:.2f} [{spread(floors)}] | "
                          f"{w:.2f} [{spread(walls[src])}] | {w / f:.2f} | {1000 * median(fcpu) / n:.2f} | "
                          f"{1000 * median(cpus[src]) / n:.2f} |", flush=True)


def _rules(tmp: Path) -> Path:
    path = tmp / "rules.json"
    path.write_text(json.dumps([[".", VERDICT, "judge"]]))
    return path


def _add_graders(cfg: Path, url: str, k: int) -> None:
    import yaml

    doc = yaml.safe_load(cfg.read_text())
    grader = {"id": "openai:chat:judge", "config": {"apiBaseUrl": url}}
    doc["defaultTest"]["assert"] += [{"type": "llm-rubric", "value": f"criterion {i}", "provider": grader}
                                     for i in range(k)]
    write_yaml(cfg, doc)


if __name__ == "__main__":
    main()
