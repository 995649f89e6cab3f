"""factcli beside its peers, inspect_ai and promptfoo, on the same local server in the same run.

Every tool sends the same N chat requests (`Q 0` ... `Q N-1`, one per test) to tests/fake_openai.py,
started once with a fixed latency, at the same concurrency, checks that each reply contains `Q`,
and writes its results where it normally does (factcli: its run store; promptfoo: its own database
unless it cannot; inspect_ai: its log). The floor is a bare aiohttp client doing only the requests.
Runs alternate (floor, factcli, promptfoo, inspect_ai, then again) so that load on a shared
machine hits them all; every figure is a median, quoted as a ratio to the floor of the same run.

The peers are installed on first use into a cache folder (default ~/.cache/factcli-benchmarks/peers,
or --cache DIR): inspect_ai into its own virtual environment from PyPI, promptfoo with npm from the
npm registry, at the versions below, so that later runs compare the same thing. Nothing else is
downloaded; no request leaves the machine (the tools' telemetry and update checks are turned off).

    python benchmarks/peers.py --n 2000 --j 64 --repeats 3
    python benchmarks/peers.py --only floor factcli     # without the peers
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import FakeServer, factcli, machine, median, openai_config, run, spread, warm_home  # noqa: E402
from throughput import FLOOR  # noqa: E402

INSPECT_VERSION = "0.3.285"
PROMPTFOO_VERSION = "0.121.20"
TOOLS = ("floor", "factcli", "promptfoo", "inspect_ai")

INSPECT_TASK = '''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

N = {n}


@task
def bench():
    return Task(dataset=[Sample(input=f"Q {{i}}", target="Q") for i in range(N)], solver=generate(),
                scorer=includes())
'''


def ensure_inspect(cache: Path) -> Path:
    """The `inspect` command of a virtual environment holding inspect_ai (and the openai client it uses)."""
    venv = cache / f"inspect-ai-{INSPECT_VERSION}"
    exe = venv / "bin" / "inspect"
    if not exe.exists():
        print(f"installing inspect_ai {INSPECT_VERSION} into {venv} (first use)…", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"inspect-ai=={INSPECT_VERSION}", "openai"],
                       check=True)
    return exe


def ensure_promptfoo(cache: Path) -> Path:
    prefix = cache / f"promptfoo-{PROMPTFOO_VERSION}"
    exe = prefix / "node_modules" / ".bin" / "promptfoo"
    if not exe.exists():
        print(f"installing promptfoo {PROMPTFOO_VERSION} into {prefix} (first use)…", flush=True)
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                        f"promptfoo@{PROMPTFOO_VERSION}"], check=True, stdout=subprocess.DEVNULL)
    return exe


def offline_env(home: Path) -> dict:
    """The environment of a peer: its own HOME and config folders, no telemetry or update check."""
    env = dict(os.environ)
    env.update(HOME=str(home), OPENAI_API_KEY="sk-benchmark", PROMPTFOO_DISABLE_TELEMETRY="1",
               PROMPTFOO_DISABLE_UPDATE="1", PROMPTFOO_CONFIG_DIR=str(home / ".promptfoo"),
               PROMPTFOO_DISABLE_SHARING="1", PROMPTFOO_SELF_HOSTED="1", NO_UPDATE_NOTIFIER="1",
               INSPECT_LOG_DIR=str(home / "inspect-logs"), INSPECT_DISPLAY="none", DO_NOT_TRACK="1")
    home.mkdir(parents=True, exist_ok=True)
    return env


def promptfoo_config(path: Path, url: str, n: int) -> Path:
    path.write_text(json.dumps({
        "prompts": ["Q {{n}}"],
        "providers": [{"id": "openai:chat:m", "config": {"apiBaseUrl": url}}],
        "defaultTest": {"assert": [{"type": "contains", "value": "Q"}]},
        "tests": [{"vars": {"n": str(i)}} for i in range(n)],
    }))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--j", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "factcli-benchmarks" / "peers")
    ap.add_argument("--only", nargs="+", choices=TOOLS, default=list(TOOLS))
    ap.add_argument("--src", help="run the factcli of this source tree (default: this checkout)")
    args = ap.parse_args()
    n, j = args.n, args.j
    tools = [t for t in TOOLS if t in args.only]
    exes = {}
    if "inspect_ai" in tools:
        exes["inspect_ai"] = ensure_inspect(args.cache)
    if "promptfoo" in tools:
        exes["promptfoo"] = ensure_promptfoo(args.cache)
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the start")
    print(f"{n} requests, concurrency {j}, server latency {args.latency * 1000:g} ms; medians of {args.repeats}")
    times: dict[str, list] = {t: [] for t in tools}
    with FakeServer(args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        fcfg = openai_config(t / "factcli.yaml", server.url, n)
        pcfg = promptfoo_config(t / "promptfooconfig.json", server.url, n)
        (t / "inspect_task.py").write_text(INSPECT_TASK.format(n=n))
        for i in range(args.repeats):
            for tool in tools:
                if tool == "floor":
                    m = run([sys.executable, "-c", FLOOR, server.url, str(n), str(j)])
                elif tool == "factcli":
                    m = factcli(["eval", "-c", fcfg, "-j", j, "--no-cache", "--no-table", "--no-progress-bar"],
                                warm_home(t / "factcli-home", args.src), src=args.src)
                    assert f"{n}/{n} rows" in m.stdout and "Errors: 0" in m.stdout, m.stdout[-1000:]
                elif tool == "promptfoo":
                    env = offline_env(t / f"pf-home-{i}")
                    out = t / f"promptfoo-{i}.json"
                    m = run([str(exes["promptfoo"]), "eval", "-c", str(pcfg), "--max-concurrency", str(j),
                             "--no-cache", "--no-table", "--no-progress-bar", "-o", str(out)],
                            env=env, cwd=t, check=False)
                    # 0.121.20 may exit 1 after the eval, its logger written to after it closed ("write
                    # after end"): the run counts when the eval completed and every row passed
                    assert "Eval complete" in m.stdout, (m.returncode, m.stdout[-2000:], m.stderr[-2000:])
                    stats = json.loads(out.read_text())["results"]["stats"]
                    assert stats["successes"] == n, stats
                else:
                    env = offline_env(t / f"inspect-home-{i}")
                    env.update(OPENAI_BASE_URL=server.url)
                    m = run([str(exes["inspect_ai"]), "eval", "inspect_task.py", "--model", "openai/m",
                             "--max-connections", str(j), "--display", "none",
                             "--log-dir", str(t / f"inspect-logs-{i}")], env=env, cwd=t, check=False)
                    assert m.returncode == 0, (m.stdout[-2000:], m.stderr[-2000:])
                times[tool].append(m)
                print(f"  run {i + 1}: {tool} {m.wall:.2f} s", flush=True)
    floor = median([m.wall for m in times["floor"]]) if "floor" in times else None
    print("| tool | wall s (median) | min-max | CPU s | peak RSS MB | ratio to the floor |")
    print("|---|---|---|---|---|---|")
    for tool in tools:
        ms = times[tool]
        wall = median([m.wall for m in ms])
        ratio = f"{wall / floor:.2f}x" if floor else "-"
        print(f"| {tool} | {wall:.2f} | {spread([m.wall for m in ms])} | {median([m.cpu for m in ms]):.2f} | "
              f"{median([m.rss_mb for m in ms]):.0f} | {ratio} |")


if __name__ == "__main__":
    main()
