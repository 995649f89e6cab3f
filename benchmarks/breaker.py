"""How long a run takes when an endpoint is down (issue 52 item 4: the circuit breaker and the connections
before the first call), at the default settings (retries, backoff, breaker): a judge that answers only 429
(with and without Retry-After), only 500, a closed judge port, a closed model port. The model under test
and the judge are fake OpenAI servers on 127.0.0.1 (tests/fake_openai.py, in this process); each run is
`factcli eval` in a process of its own, killed after --timeout seconds.

    python benchmarks/breaker.py [--rows 10] [--timeout 120] [--src OTHER_TREE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from common import ROOT, free_port  # noqa: E402
from fake_openai import FakeOpenAI  # noqa: E402

PASS = '{"reason": "fine", "pass": true, "score": 1}'


def config(model_url: str, judge_url: str, rows: int) -> str:
    tests = "".join(f"  - vars: {{q: 'question {i}'}}\n" for i in range(rows))
    return (f'prompts: ["Q: {{{{q}}}}"]\n'
            f'providers: [{{id: openai:chat:bot, config: {{apiBaseUrl: "{model_url}"}}}}]\n'
            f'defaultTest:\n  options: {{provider: {{id: openai:chat:judge, config: {{apiBaseUrl: "{judge_url}"}}}}}}\n'
            f'  assert: [{{type: llm-rubric, value: "is polite"}}]\n'
            f"tests:\n{tests}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--only", nargs="*", help="scenario names to run (default: all)")
    ap.add_argument("--src", help="run the factcli of this source tree (default: this checkout)")
    args = ap.parse_args()
    src = args.src or str(ROOT)
    scenarios = {
        "judge: 429 only": ("429",),
        "judge: 429 with Retry-After: 1": ("429-retry-after:1",),
        "judge: 500 only": ("500",),
        "judge: closed port": "closed-judge",
        "model: closed port": "closed-model",
    }
    print(f"{args.rows} rows, -j 4 (default), default retries and breaker; factcli from {src}")
    print("| scenario | wall | exit | rows stored | model requests | judge requests | stop line |")
    print("|---|---|---|---|---|---|---|")
    for name, kind in scenarios.items():
        if args.only and name not in args.only:
            continue
        with FakeOpenAI() as model, FakeOpenAI() as judge, tempfile.TemporaryDirectory() as tmp:
            judge.add_rule(".", PASS, model="judge")
            model_url, judge_url = model.url, judge.url
            if kind == "closed-judge":
                judge_url = f"http://127.0.0.1:{free_port()}/v1"
            elif kind == "closed-model":
                model_url = f"http://127.0.0.1:{free_port()}/v1"
            else:
                judge.set_fault_rate(1.0, kind)
            cfg = Path(tmp) / "c.yaml"
            cfg.write_text(config(model_url, judge_url, args.rows))
            out = Path(tmp) / "r.json"
            env = {**os.environ, "FACTCLI_HOME": str(Path(tmp) / "home"), "PYTHONPATH": src, "OPENAI_API_KEY": "sk-b"}
            for var in ("OPENAI_BASE_URL", "FACTCLI_BACKOFF_MS", "FACTCLI_MAX_RETRIES", "FACTCLI_BREAKER_FAILURES",
                        "FACTCLI_BREAKER_SECONDS"):
                env.pop(var, None)
            start = time.perf_counter()
            try:
                proc = subprocess.run([sys.executable, "-m", "factcli", "eval", "-c", str(cfg), "--no-progress-bar",
                                       "--no-table", "-o", str(out)], env=env, cwd=src, capture_output=True,
                                      text=True, timeout=args.timeout)
                wall, code = f"{time.perf_counter() - start:.1f} s", str(proc.returncode)
                stop = " ".join(line for line in proc.stderr.splitlines() if "Stopped" in line)
            except subprocess.TimeoutExpired:
                wall, code, stop = f"> {args.timeout:g} s (killed)", "-", ""
            doc = json.loads(out.read_text()) if out.exists() else {}
            rows = len(((doc.get("results") or {}).get("results")) or [])
            print(f"| {name} | {wall} | {code} | {rows}/{args.rows} | {model.request_count} | "
                  f"{judge.request_count if kind != 'closed-judge' else '-'} | {' '.join(stop.split())[:300]} |",
                  flush=True)


if __name__ == "__main__":
    main()
