"""Shared pieces of the benchmark scripts: the fake server, config files, measured subprocesses.

Every factcli measurement runs `python -m factcli` in a fresh process (start-up included) with its
own FACTCLI_HOME, and reads that process's own wall time, CPU time and peak RSS from `os.wait4`,
so nothing else running on the machine is counted in CPU or memory (it still slows the wall clock:
that is why every figure is a median of several runs).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass
class Measured:
    wall: float  # seconds
    cpu: float  # user + system seconds of the child
    rss_mb: float  # peak resident set size
    returncode: int
    stdout: str
    stderr: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeServer:
    """tests/fake_openai.py in its own process, so its CPU is not charged to the client measured."""

    def __init__(self, latency: float = 0.0, rate_limit: str | None = None, rules: str | Path | None = None):
        self.latency = latency
        self.rate_limit = rate_limit  # N[/SECONDS[/RETRY_AFTER]]: 429 beyond N requests per window
        self.rules = rules  # a JSON file of [pattern, reply, model] rules (tests/fake_openai.py --rules)
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> "FakeServer":
        extra = ["--rate-limit", self.rate_limit] if self.rate_limit else []
        extra += ["--rules", str(self.rules)] if self.rules else []
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "fake_openai.py"), "--port", str(free_port()),
             "--latency", str(self.latency), *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http"):
            self.proc.kill()
            raise SystemExit("the fake server did not start")
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def run(cmd: list[str], env: dict | None = None, cwd: str | Path | None = None, check: bool = True,
        src: str | None = None) -> Measured:
    """Run `cmd`, returning its own wall, CPU and peak RSS. `src`: a factcli source tree to run
    instead of this checkout (for before/after comparisons)."""
    env = dict(os.environ if env is None else env)
    # An installed factcli has its bytecode compiled; without .pyc files every run would also
    # compile factcli's sources (~0.4 s here), so let the first run write them.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if src:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        # `python -m` puts the working directory first on sys.path: run from `src` itself, or a
        # checkout in the working directory would be imported instead of it
        cwd = cwd or src
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # read the pipes while waiting: a child that fills one would block forever otherwise
    import threading

    chunks: dict[str, bytes] = {}

    def drain(name, stream):
        chunks[name] = stream.read()

    threads = [threading.Thread(target=drain, args=(n, s)) for n, s in (("out", proc.stdout), ("err", proc.stderr))]
    for t in threads:
        t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    for t in threads:
        t.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    m = Measured(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode,
                 chunks["out"].decode(errors="replace"), chunks["err"].decode(errors="replace"))
    if check and m.returncode not in (0, 100):
        raise SystemExit(f"{' '.join(map(str, cmd))} failed ({m.returncode}):\n{m.stderr[-3000:]}")
    return m


def factcli(args: list[str], home: str | Path, *, env: dict | None = None, cwd=None, src: str | None = None,
            python_flags: tuple[str, ...] = ()) -> Measured:
    e = dict(os.environ if env is None else env)
    e.update(FACTCLI_HOME=str(home), COLUMNS="120")
    e.setdefault("OPENAI_API_KEY", "sk-benchmark")
    src, python = split_src(src)
    return run([python, *python_flags, "-m", "factcli", *map(str, args)], env=e, cwd=cwd, src=src)


def split_src(src: str | None) -> tuple[str | None, str]:
    """`--src DIR@PYTHON`: the tree DIR run by another interpreter (one whose environment holds the
    dependency versions that tree installs, e.g. a typer of its own); plain `DIR` runs with this one."""
    if src and "@" in src:
        tree, python = src.rsplit("@", 1)
        return tree, python
    return src, sys.executable


def warm_home(home: str | Path, src: str | None = None) -> Path:
    """A FACTCLI_HOME whose database already exists, as for anyone after their first run: creating
    it imports sqlite-utils (and through it numpy), ~0.3 s that a benchmark should not repeat."""
    home = Path(home)
    if not (home / "factcli.db").exists():
        cfg = write_yaml(home.parent / f"{home.name}-warm.yaml", {
            "prompts": ["hi"], "providers": ["echo"], "tests": [{"assert": [{"type": "contains", "value": "hi"}]}]})
        factcli(["eval", "-c", cfg, "--no-table", "--no-progress-bar"], home, src=src)
    return home


def median(values) -> float:
    return statistics.median(values)


def spread(values) -> str:
    """min-max, to show how noisy the medians are."""
    return f"{min(values):.2f}-{max(values):.2f}"


def machine() -> str:
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return (f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def write_yaml(path: Path, doc: dict) -> Path:
    import yaml

    with open(path, "w", encoding="utf-8") as fh:
        yaml.dump(doc, fh, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)
    return path


THREE_ASSERTIONS = [
    {"type": "contains", "value": "Answer"},
    {"type": "icontains", "value": "QUESTION"},
    {"type": "regex", "value": r"\d+"},
]


def echo_config(path: Path, n: int) -> Path:
    """n tests through the echo provider, three deterministic assertions each (all pass)."""
    return write_yaml(path, {
        "description": f"{n} echo rows",
        "prompts": ["Answer: {{q}}"],
        "providers": ["echo"],
        "defaultTest": {"assert": THREE_ASSERTIONS},
        "tests": [{"vars": {"q": f"question {i}"}} for i in range(n)],
    })


def openai_config(path: Path, url: str, n: int, **provider_config) -> Path:
    """n tests against the fake server through factcli's OpenAI-compatible provider."""
    return write_yaml(path, {
        "prompts": ["Q {{n}}"],
        "providers": [{"id": "openai:chat:m", "config": {"apiBaseUrl": url, **provider_config}}],
        "defaultTest": {"assert": [{"type": "contains", "value": "Q"}]},
        "tests": [{"vars": {"n": str(i)}} for i in range(n)],
    })
