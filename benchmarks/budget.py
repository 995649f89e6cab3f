"""How many rows a `--max-cost` budget finishes: 40 rows of gpt-4o-mini graded by gpt-4o
(llm-rubric), neither with `max_tokens` of its own (or the grader with --grader-max-tokens), against the fake server priced as OpenAI
(OpenAI's model names sent to a local address are priced as OpenAI's: providers/pricing.py).
First the whole run without a budget (what it costs), then each budget at -j 4.

    python benchmarks/budget.py --budgets 0.05 0.02 [--src OTHER_TREE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, free_port, run  # noqa: E402

ROWS = 40


def config(url: str, grader_cap: int | None) -> str:
    tests = "".join(f"  - vars: {{n: '{i}'}}\n" for i in range(ROWS))
    return (f'prompts: ["Question {{{{n}}}}: name a prime number and say why it is prime."]\n'
            f'providers: [{{id: "openai:chat:gpt-4o-mini", config: {{apiBaseUrl: "{url}"}}}}]\n'
            f'defaultTest:\n  options: {{provider: {{id: "openai:chat:gpt-4o", config: {{apiBaseUrl: "{url}"'
            + (f", max_tokens: {grader_cap}" if grader_cap else "") + '}}}\n'
            f'  assert: [{{type: llm-rubric, value: "names a prime number and explains why"}}]\n'
            f"tests:\n{tests}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", type=float, nargs="+", default=[0.05])
    ap.add_argument("-j", type=int, default=4)
    ap.add_argument("--grader-max-tokens", type=int, help="the grader's own max_tokens (default: none)")
    ap.add_argument("--src", help="run the factcli of this source tree (default: this checkout)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "rules.json"
        rules.write_text(json.dumps([["Rubric", '{"reason": "7 is prime: no divisor but 1 and 7", "pass": true, '
                                                 '"score": 1}']]))
        server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fake_openai.py"), "--port", str(free_port()),
                                   "--rules", str(rules)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            url = server.stdout.readline().strip()
            cfg = Path(tmp) / "c.yaml"
            cfg.write_text(config(url, args.grader_max_tokens))
            env = {**__import__("os").environ, "OPENAI_API_KEY": "sk-bench"}
            env.pop("OPENAI_BASE_URL", None)
            cap = f"grader max_tokens {args.grader_max_tokens}" if args.grader_max_tokens else "no max_tokens"
            print(f"{ROWS} rows, -j {args.j}, gpt-4o-mini graded by gpt-4o, {cap}")
            print("| budget | rows finished | spent | exit | stop message |")
            print("|---|---|---|---|---|")
            for budget in [None, *args.budgets]:
                env["FACTCLI_HOME"] = str(Path(tmp) / f"home-{budget}")
                out = Path(tmp) / f"r-{budget}.json"
                cmd = [sys.executable, "-m", "factcli", "eval", "-c", str(cfg), "-j", str(args.j), "--no-progress-bar",
                       "--no-table", "--no-cache", "-o", str(out)]
                if budget is not None:
                    cmd += ["--max-cost", str(budget)]
                m = run(cmd, env=env, check=False, src=args.src)
                doc = json.loads(out.read_text()) if out.exists() else {}
                rows = len(((doc.get("results") or {}).get("results")) or [])
                cost = (doc.get("factcli") or {}).get("cost") or {}
                spent = (cost.get("model") or 0) + (cost.get("grader") or 0)
                stop = " ".join(line for line in m.stderr.splitlines() if "budget" in line)
                print(f"| {'none' if budget is None else f'${budget:g}'} | {rows}/{ROWS} | ${spent:.4f} | "
                      f"{m.returncode} | {' '.join(stop.split())[:400]} |")
        finally:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
