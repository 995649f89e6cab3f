"""Throughput against the physical floor: factcli vs a minimal raw aiohttp client.

Starts tests/fake_openai.py in its own process with a fixed latency, then, for each (N, -j):
- floor: a bare aiohttp client sending the same N chat requests at the same concurrency;
- factcli: `factcli eval` as a subprocess (start-up included), no cache, no table.
Each measurement is repeated and the median reported, with the ratio to the floor and the CPU
seconds per row of the factcli process.

    python benchmarks/throughput.py --n 500 2000 --j 1 4 64 --latency 0.1 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def floor(url: str, n: int, j: int) -> None:
    import aiohttp

    sem = asyncio.Semaphore(j)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        async def one(i: int) -> None:
            async with sem:
                async with session.post(f"{url}/chat/completions", headers={"Authorization": "Bearer x"},
                                        json={"model": "m", "messages": [{"role": "user", "content": f"Q {i}"}]}) as r:
                    await r.json()

        await asyncio.gather(*(one(i) for i in range(n)))


def write_config(path: Path, url: str, n: int) -> None:
    import yaml

    tests = [{"vars": {"n": str(i)}} for i in range(n)]
    yaml.safe_dump({"prompts": ["Q {{n}}"], "providers": [{"id": "openai:chat:m", "config": {"apiBaseUrl": url}}],
                    "tests": tests, "defaultTest": {"assert": [{"type": "contains", "value": "Q"}]}},
                   path.open("w"))


def run_factcli(cfg: Path, j: int, home: str) -> tuple[float, float]:
    env = dict(os.environ, FACTCLI_HOME=home, OPENAI_API_KEY="x")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "factcli", "eval", "-c", str(cfg), "-j", str(j), "--no-cache",
                           "--no-table", "--no-progress-bar"], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"factcli failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[500, 2000])
    ap.add_argument("--j", type=int, nargs="+", default=[1, 4, 64])
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-serial-rows", type=int, default=500, help="skip -j 1 above this many rows")
    args = ap.parse_args()
    port = free_port()
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fake_openai.py"), "--port", str(port),
                               "--latency", str(args.latency)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    url = server.stdout.readline().strip()
    print(f"| N | -j | floor (s) | factcli (s) | ratio | CPU ms/row |")
    print(f"|---|---|---|---|---|---|")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in args.n:
                cfg = Path(tmp) / f"c{n}.yaml"
                write_config(cfg, url, n)
                for j in args.j:
                    if j == 1 and n > args.max_serial_rows:
                        continue
                    floors, walls, cpus = [], [], []
                    for _ in range(args.repeats):
                        t = time.perf_counter()
                        asyncio.run(floor(url, n, j))
                        floors.append(time.perf_counter() - t)
                        wall, cpu = run_factcli(cfg, j, str(Path(tmp) / "home"))
                        walls.append(wall)
                        cpus.append(cpu)
                    f, w, c = statistics.median(floors), statistics.median(walls), statistics.median(cpus)
                    print(f"| {n} | {j} | {f:.2f} | {w:.2f} | {w / f:.2f} | {1000 * c / n:.2f} |", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
