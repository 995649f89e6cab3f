"""--batch against the OpenAI files+batches stand-in (tests/fake_batches.py): N rows (default 1,000), each
graded by factuality and factual-correctness, model and grader gpt-4o-mini (priced from litellm's table,
batch prices `input_cost_per_token_batches` / `output_cost_per_token_batches`).

1. the run without --batch, then with it: the cost ratio (<= 0.5 wanted), verdicts row for row
   (pass, score, named scores), batches per round;
2. the batched run's cost priced by hand from the stand-in's own usage (every line of every output file),
   against the cost factcli printed and stored (within 1% wanted);
3. `factcli eval --batch` SIGKILLed while its first batch runs, then `--resume`: lines submitted twice at
   the stand-in (0 wanted) and the results against the uninterrupted batched run.

    python benchmarks/batch_cost.py [--rows 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from batch_judge import config, scripted  # noqa: E402
from fake_batches import FakeBatchOpenAI  # noqa: E402

from factcli.providers.pricing import table_price  # noqa: E402


def eval_cmd(home: Path, *args: str, wait: bool = True):
    env = dict(os.environ, OPENAI_API_KEY="sk-test", FACTCLI_HOME=str(home), PYTHONPATH=str(ROOT),
               FACTCLI_BATCH_QUIET_MS="1000", FACTCLI_BATCH_POLL_MS="500")
    cmd = [sys.executable, "-m", "factcli", "eval", "--no-progress-bar", "--no-table", *args]
    if not wait:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode not in (0, 100):
        raise SystemExit(f"factcli eval {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done, time.perf_counter() - started


def verdicts(path: Path) -> dict:
    rows = json.loads(path.read_text())["results"]["results"]
    return {(r["testIdx"], r["promptIdx"]): (r["success"], round(r["score"], 9), json.dumps(r["namedScores"], sort_keys=True))
            for r in rows}


def costs(path: Path) -> tuple[float, float]:
    """(model cost, grading cost) as stored in the results file."""
    rows = json.loads(path.read_text())["results"]["results"]
    model = sum(r["response"].get("cost") or 0 for r in rows)
    grading = sum((r.get("factcli") or {}).get("graderCost") or 0 for r in rows)
    return model, grading


def printed_cost(stdout: str) -> tuple[float, float]:
    m = re.search(r"cost \$([0-9.,]+) \(\+\$([0-9.,]+) grading\)", stdout)
    if m is None:
        raise SystemExit(f"no cost line in:\n{stdout}")
    return float(m.group(1).replace(",", "")), float(m.group(2).replace(",", ""))


def usage_by_hand(server: FakeBatchOpenAI) -> tuple[int, int, float]:
    """Every line the stand-in answered in a batch (its output files): tokens and their batch price."""
    price = table_price("gpt-4o-mini")
    prompt = completion = 0
    for batch in server.batches.values():
        fid = batch.get("output_file_id")
        if not fid:
            continue
        for line in server.files[fid]["data"].decode().splitlines():
            usage = json.loads(line)["response"]["body"]["usage"]
            prompt += usage["prompt_tokens"]
            completion += usage["completion_tokens"]
    return prompt, completion, prompt * price.batch_input + completion * price.batch_output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()
    price = table_price("gpt-4o-mini")
    print(f"gpt-4o-mini: ${price.input * 1e6:.3f}/${price.output * 1e6:.3f} per M tokens direct, "
          f"${price.batch_input * 1e6:.4f}/${price.batch_output * 1e6:.4f} batch (litellm's table)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        with FakeBatchOpenAI(rules=[(".", scripted)]) as server:
            cfg = tmp / "c.yaml"
            cfg.write_text(config(args.rows, server.url))
            direct_out, batch_out = tmp / "direct.json", tmp / "batch.json"
            direct, t_direct = eval_cmd(tmp / "h1", "-c", str(cfg), "--no-cache", "-o", str(direct_out))
            direct_requests = server.request_count
            batched, t_batch = eval_cmd(tmp / "h2", "-c", str(cfg), "--no-cache", "--batch", "-o", str(batch_out))
            d_model, d_grading = costs(direct_out)
            b_model, b_grading = costs(batch_out)
            same = verdicts(direct_out) == verdicts(batch_out)
            uninterrupted = len(server.batch_lines)
            rounds: dict[int, int] = {}
            for b in server.batches.values():
                rounds[b["request_counts"]["total"]] = rounds.get(b["request_counts"]["total"], 0) + 1
            print(f"\n{args.rows} rows, factuality + factual-correctness, -j 8")
            print(f"  direct : {direct_requests} requests, cost ${d_model + d_grading:.6f} "
                  f"(model ${d_model:.6f} + grading ${d_grading:.6f}), {t_direct:.1f} s")
            print(f"  --batch: {len(server.batches)} batches of {sorted(rounds)} lines, {len(server.batch_lines)} lines, "
                  f"cost ${b_model + b_grading:.6f} (model ${b_model:.6f} + grading ${b_grading:.6f}), {t_batch:.1f} s")
            note = [line for line in batched.stdout.splitlines() + batched.stderr.splitlines() if "batch mode" in line]
            print(f"  factcli says: {note[0].strip() if note else '(no batch line)'}")
            ratio = (b_model + b_grading) / (d_model + d_grading)
            print(f"  cost ratio batch/direct: {ratio:.4f} (<= 0.5 wanted); verdicts identical: {same}")
            p_model, p_grading = printed_cost(batched.stdout)
            prompt, completion, by_hand = usage_by_hand(server)
            printed = p_model + p_grading
            print(f"  by hand: {prompt} prompt + {completion} completion tokens at the batch price = ${by_hand:.6f}; "
                  f"printed ${printed:.6f} ({abs(printed - by_hand) / by_hand * 100:.3f}% off), stored "
                  f"${b_model + b_grading:.6f} ({abs(b_model + b_grading - by_hand) / by_hand * 100:.4f}% off)")

        # killed while its first batch runs, then --resume
        with FakeBatchOpenAI(rules=[(".", scripted)]) as server:
            cfg.write_text(config(args.rows, server.url))
            server.hold()
            home = tmp / "h3"
            proc = eval_cmd(home, "-c", str(cfg), "--no-cache", "--batch", wait=False)
            while not server.batches and proc.poll() is None:
                time.sleep(0.1)
            time.sleep(0.5)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            at_kill = dict(server.statuses())
            lines_at_kill = len(server.batch_lines)
            server.release()
            resumed, t_resume = eval_cmd(home, "--resume", "latest", "-o", str(tmp / "killed.json"))
            duplicates = len(server.batch_lines) - len(set(server.batch_lines))
            same_resumed = verdicts(tmp / "killed.json") == verdicts(batch_out)
            print(f"\nSIGKILL while {len(at_kill)} batch(es) ran ({lines_at_kill} lines, {list(at_kill.values())}), "
                  f"then --resume ({t_resume:.1f} s):")
            print(f"  {len(server.batches)} batches, {len(server.batch_lines)} lines submitted in all; duplicate "
                  f"custom_ids: {duplicates} (the uninterrupted batched run submitted {uninterrupted}); "
                  f"results as the uninterrupted batched run: {same_resumed}")
            kept = [line for line in resumed.stderr.splitlines() if "Resuming" in line or "batch mode" in line]
            for line in kept + [line for line in resumed.stdout.splitlines() if "batch mode" in line]:
                print(f"  factcli says: {line.strip()}")


if __name__ == "__main__":
    main()
