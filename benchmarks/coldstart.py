"""Cold start: `factcli --help` (target < 0.3 s) and a one-row eval with the `echo` provider
(target < 0.6 s), each a fresh `python -m factcli` process; plus a bare `python -c pass` for scale.

    python benchmarks/coldstart.py --repeats 7
    python benchmarks/coldstart.py --importtime    # the slowest imports of the one-row eval
    python benchmarks/coldstart.py --dataclasses   # the eval's dataclasses that build their docstring

A dataclass without a docstring gets one made from `inspect.signature` as its class is made (~60 us
each; 25 of them on an eval's start before issue 30), so the classes an eval loads carry written ones;
`--dataclasses` names those that do not (a start-up cost, not an error).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import factcli, median, run, split_src, spread, write_yaml  # noqa: E402

_LIST_DATACLASSES = """
import dataclasses, sys
sys.argv = ['factcli', 'eval', '-c', sys.argv[1], '--no-progress-bar']
from factcli.cli.main import main
try:
    main()
except SystemExit:
    pass
for name, module in sorted(sys.modules.items()):
    if name.startswith('factcli'):
        for k, v in vars(module).items():
            if isinstance(v, type) and dataclasses.is_dataclass(v) and v.__module__ == name:
                print('DATACLASS', name + '.' + k, (v.__doc__ or '').startswith(k + '('), file=sys.stderr)
"""


def dataclasses_without_docstring(cfg: str, home: Path, src: str | None) -> None:
    tree, python = split_src(src)
    env = dict(os.environ, FACTCLI_HOME=str(home))
    if tree:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (tree, env.get("PYTHONPATH")) if p)
    err = subprocess.run([python, "-c", _LIST_DATACLASSES, str(cfg)], capture_output=True, text=True, env=env,
                         cwd=tree or None).stderr
    found = [line.split()[1:] for line in err.splitlines() if line.startswith("DATACLASS ")]
    made = [name for name, generated in found if generated == "True"]
    print(f"{len(found)} dataclasses loaded by a one-row eval; {len(made)} build their docstring at import"
          + (": " + ", ".join(made) if made else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--src", help="run the factcli of this source tree (default: this checkout)")
    ap.add_argument("--importtime", action="store_true", help="print the slowest imports of the one-row eval")
    ap.add_argument("--dataclasses", action="store_true",
                    help="name the one-row eval's dataclasses that build their docstring at import")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = write_yaml(Path(tmp) / "one.yaml", {
            "prompts": ["Answer: {{q}}"], "providers": ["echo"],
            "tests": [{"vars": {"q": "one"}, "assert": [{"type": "contains", "value": "Answer"}]}]})
        home = Path(tmp) / "home"
        # warm-up: writes the bytecode, and the database exists from now on, as for any user after day one
        factcli(["eval", "-c", cfg], home, src=args.src)
        if args.dataclasses:
            dataclasses_without_docstring(cfg, home, args.src)
            return
        if args.importtime:
            m = factcli(["eval", "-c", cfg], home, src=args.src, python_flags=("-X", "importtime"))
            rows = []
            for line in m.stderr.splitlines():
                if line.startswith("import time:") and "cumulative" not in line:
                    _, cum, name = line.split("|")
                    rows.append((int(cum), name.rstrip()))
            for cum, name in sorted(rows, reverse=True)[:40]:
                print(f"{cum / 1000:8.1f} ms {name}")
            return
        cases = {
            "python -c pass": lambda: run([sys.executable, "-c", "pass"]),
            "factcli --help": lambda: factcli(["--help"], home, src=args.src),
            "factcli eval (1 echo row)": lambda: factcli(["eval", "-c", cfg], home, src=args.src),
        }
        walls: dict = {name: [] for name in cases}
        cpus: dict = {name: [] for name in cases}
        for _ in range(args.repeats):
            for name, fn in cases.items():
                m = fn()
                walls[name].append(m.wall)
                cpus[name].append(m.cpu)
        print(f"medians of {args.repeats} runs")
        print("| command | wall s (median) | min-max | CPU s (median) |")
        print("|---|---|---|---|")
        for name in cases:
            print(f"| {name} | {median(walls[name]):.3f} | {spread(walls[name])} | {median(cpus[name]):.3f} |")


if __name__ == "__main__":
    main()
