#!/usr/bin/env python3
"""Snapshot the results JSON of every shipped config, to prove a refactor changed no behaviour.

    python tests/results_snapshot.py --src TREE --out DIR      # run every config of TREE, write DIR/<name>.json|.meta
    python tests/results_snapshot.py --compare DIR_A DIR_B     # identical/different per config; exit 1 if any differs

Each config runs as `python -m factcli eval -c CONFIG -o FILE --no-progress-bar --no-table --no-cache`
with cwd = TREE (as the README runs them), PYTHONPATH = TREE, a fresh FACTCLI_HOME and HOME, and
every provider pointed at TREE/tests/fake_openai.py started with --latency 0 and the RULES below, so
both trees see byte-identical replies. The environment is built from scratch (PATH only is
inherited) so that keys, proxies or FACTCLI_* settings of the caller cannot leak into a run.

What runs (all of TREE/examples/*/promptfooconfig.yaml and TREE/configs/**/*.yaml that are eval
configs):
- examples/{quickstart,factual-correctness,factscore,facts-grounding}: offline (Python stand-ins).
- examples/openai, configs/truthfulqa/*.yaml: OPENAI_BASE_URL -> fake; graders are openai:gpt-5 too.
- examples/ollama: OLLAMA_BASE_URL -> fake (litellm's /api/chat is not served there, so that column
  is a deterministic 404 error row); its vllm-qwen column has apiBaseUrl http://localhost:8000/v1
  hard-coded, so a second fake server is started on port 8000 (the run stops if 8000 is taken:
  otherwise the column would be 16 s of connection retries, or whatever else listens there; two
  snapshots started at once take turns, through a lock file in the temp directory).
- configs/factscore-bios.yaml: FACTSCORE_KNOWLEDGE = TREE/examples/factscore/knowledge, the folder of
  pages the tree ships (3 of its 20 topics; the other 17 rows are "not a document title" errors).
- configs/facts-grounding.yaml: its tests file, facts-grounding-examples.csv, is a Kaggle download
  that is not shipped, so it exits 1 (bad input) before any call; the .meta keeps that error.
- configs/benchmarks/*.yaml read their tests from the Hugging Face Hub: FACTCLI_HF_DATASETS_SERVER
  points at a port where nothing listens, so each exits 1 (bad input, "cannot download") before any
  call; tests/test_benchmarks.py runs them against a stand-in datasets-server instead.
- configs/calibration/{baseline,factuality,variants}.yaml are `factcli calibrate` inputs (`labels:` +
  `graders:`, no prompts or providers): they run as `factcli calibrate -c CONFIG -o FILE`, and the
  calibration report JSON is kept instead of a results document.

Normalized (in the raw text, so formatting changes still show): the run id, ISO timestamps, the
values of latencyMs/totalLatencyMs/durationMs, the scratch dir (FACTCLI_HOME, output path), the
tree path (-> <TREE>) and the fake server's random port (-> <FAKE_URL>). Two runs of one tree are
otherwise byte-identical at the configs' own concurrency, so nothing else (row order included) is
rewritten. COLUMNS is fixed wide so that stderr does not wrap differently for trees of different
path lengths.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# Replies for every model call the configs make; first match on the last user message wins.
# Grader replies come first so that model-under-test patterns can never answer a grading prompt.
RULES = [
    # factuality (configs/truthfulqa/factuality.yaml): a mix of passing and failing categories
    [r"(?s)<question>.*Question: [A-M]", '{"category": "A", "reason": "consistent with the expert"}'],
    [r"<expert_answer>", '{"category": "D", "reason": "disagrees with the expert"}'],
    # factual-correctness: decompose, then NLI (premise = the echoed answer for recall)
    [r"^<text>\n", '{"claims": ["The first claim.", "The second claim."]}'],
    [r"^<premise>\nEcho", '{"verdicts": [{"claim": "The first claim.", "verdict": "SUPPORTED", "reason": "r"}, '
                          '{"claim": "The second claim.", "verdict": "NEUTRAL", "reason": "r"}]}'],
    [r"^<premise>\n[A-M]", '{"verdicts": [{"claim": "The first claim.", "verdict": "SUPPORTED", "reason": "r"}, '
                           '{"claim": "The second claim.", "verdict": "SUPPORTED", "reason": "r"}]}'],
    [r"<claims>\n", '{"verdicts": [{"claim": "The first claim.", "verdict": "CONTRADICTED", "reason": "r"}, '
                    '{"claim": "The second claim.", "verdict": "NEUTRAL", "reason": "r"}]}'],
    # factscore (configs/factscore-bios.yaml): decompose, then verify against passages
    [r"<sentences>\n", '{"facts": ["She was a physicist.", "She was a chemist.", "She was born in 1867."]}'],
    [r"(?s)^<passages>\n\[1\] Title: Marie Curie.*<facts>",
     '{"verdicts": [{"fact": "She was a physicist.", "verdict": true, "reason": "stated", "evidence": 1}, '
     '{"fact": "She was a chemist.", "verdict": true, "reason": "stated", "evidence": 1}, '
     '{"fact": "She was born in 1867.", "verdict": true, "reason": "stated", "evidence": 1}]}'],
    [r"<facts>\n", '{"verdicts": [{"fact": "She was a physicist.", "verdict": false, "reason": "other person", '
                   '"evidence": null}, {"fact": "She was a chemist.", "verdict": false, "reason": "no", "evidence": '
                   'null}, {"fact": "She was born in 1867.", "verdict": true, "reason": "odd", "evidence": 1}]}'],
    # models under test (examples/openai, examples/ollama, configs/factscore-bios.yaml); else "Echo: ..."
    ["capital of California", "Sacramento."],
    ["capital of New York", "Albany."],
    ["capital of Australia", "Sydney is the capital."],
    ["capital of Canada", "Toronto."],
    ["Tell me a bio of", "She was a physicist and chemist. She was born in 1867."],
]
# Extra environment per config, relative to the tree (what the config's comments ask for).
EXTRA_ENV = {"configs/factscore-bios.yaml": {"FACTSCORE_KNOWLEDGE": "examples/factscore/knowledge"}}
VLLM_PORT = 8000  # examples/ollama's vllm-qwen column: apiBaseUrl http://localhost:8000/v1
STDERR_LINES = 20
TIMING_KEYS = re.compile(r'"(latencyMs|totalLatencyMs|durationMs)": -?[0-9][0-9.eE+-]*')
RUN_ID = re.compile(r"\beval-\d{8}T\d{6}-[0-9a-f]+\b")
ISO_TIME = re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?")


def config_files(tree: Path) -> list[Path]:
    return sorted(tree.glob("examples/*/promptfooconfig.yaml")) + sorted(tree.glob("configs/**/*.yaml"))


def is_calibrate_input(path: Path) -> bool:
    import yaml  # PyYAML is a dependency of factcli, so the venv has it

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError:  # YAML PyYAML does not read (a `?` in a flow mapping) is an eval config
        return False
    return isinstance(data, dict) and "graders" in data and "labels" in data and "providers" not in data


def snapshot_name(rel: Path) -> str:
    parts = [p for p in rel.with_suffix("").parts if p != "promptfooconfig"]
    return "-".join(parts)


def start_fake(tree: Path, port: int, rules: Path) -> tuple[subprocess.Popen, str]:
    log = rules.with_name(f"fake-{port}.log")  # a file, not a pipe: nobody drains it while configs run
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, str(tree / "tests/fake_openai.py"), "--port", str(port),
                                 "--rules", str(rules), "--latency", "0"], stdout=subprocess.PIPE, stderr=err,
                                text=True, env={"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1"})
    url = proc.stdout.readline().strip()  # the server prints its base URL once it listens
    if not url.startswith("http"):
        proc.kill()
        proc.wait()
        sys.exit(f"fake server on port {port} did not start: {log.read_text().strip()[-500:]}")
    return proc, url


def normalize(text: str, literals: list[tuple[str, str]]) -> str:
    for old, new in literals:  # longest first, so a path inside another is not half-replaced
        text = text.replace(old, new)
    text = RUN_ID.sub("<RUN_ID>", text)
    text = ISO_TIME.sub("<TIME>", text)
    return TIMING_KEYS.sub(lambda m: f'"{m.group(1)}": "<MS>"', text)


@contextlib.contextmanager
def _port_lock():
    """Snapshots taken at once (two checkouts) would both need port 8000: the second waits for the first."""
    import fcntl

    with open(Path(tempfile.gettempdir()) / f"factcli-snapshot-port-{VLLM_PORT}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def run_tree(tree: Path, out: Path) -> int:
    tree = tree.resolve()
    if out.exists() and any(out.iterdir()):  # stale snapshots of configs that are gone would compare as real
        sys.exit(f"{out} is not empty: give a new directory")
    out.mkdir(parents=True, exist_ok=True)
    with _port_lock(), tempfile.TemporaryDirectory(prefix="factcli-snapshot-") as scratch_dir:
        scratch = Path(scratch_dir)
        rules = scratch / "rules.json"
        rules.write_text(json.dumps(RULES), encoding="utf-8")
        servers = []
        try:
            for port in (0, VLLM_PORT):
                servers.append(start_fake(tree, port, rules))
            return _run_configs(tree, out, scratch, servers[0][1])
        finally:
            for proc, _ in servers:
                proc.terminate()
                proc.wait(10)


def _env(tree: Path, home: Path, url: str, extra: dict) -> dict:
    return {"PATH": os.environ["PATH"], "HOME": str(home), "FACTCLI_HOME": str(home), "PYTHONPATH": str(tree),
            "PYTHONDONTWRITEBYTECODE": "1",  # leave no __pycache__ in the tree under test
            "LANG": "C.UTF-8", "TZ": "UTC", "COLUMNS": "1000", "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": url, "OLLAMA_BASE_URL": url.removesuffix("/v1"),
            "FACTCLI_HF_DATASETS_SERVER": "http://127.0.0.1:9",  # nothing listens: never the real Hub
            **{k: str(tree / v) for k, v in extra.items()}}


def _run_configs(tree: Path, out: Path, scratch: Path, url: str) -> int:
    # The editable install points at another checkout: make sure TREE's factcli is the one imported.
    probe = subprocess.run([sys.executable, "-c", "import factcli; print(factcli.__file__)"], cwd=tree,
                           env=_env(tree, scratch, url, {}), capture_output=True, text=True)
    if not probe.stdout.strip().startswith(str(tree) + os.sep):
        sys.exit(f"factcli imports from {probe.stdout.strip() or probe.stderr.strip()}, not from {tree}")
    for config in config_files(tree):
        rel = config.relative_to(tree)
        name = snapshot_name(rel)
        home = scratch / name
        home.mkdir()
        raw = home / "results.json"
        if is_calibrate_input(config):  # its report JSON instead of a results document
            cmd = [sys.executable, "-m", "factcli", "calibrate", "-c", str(rel), "-o", str(raw),
                   "--no-progress-bar", "--no-cache"]
        else:
            cmd = [sys.executable, "-m", "factcli", "eval", "-c", str(rel), "-o", str(raw),
                   "--no-progress-bar", "--no-table", "--no-cache"]
        proc = subprocess.run(cmd, cwd=tree, env=_env(tree, home, url, EXTRA_ENV.get(str(rel), {})),
                              capture_output=True, text=True, timeout=900)
        pairs = {(p, tag) for base, tag in ((home, "<FACTCLI_HOME>"), (scratch, "<TMP>"), (tree, "<TREE>"))
                 for p in (str(base), os.path.realpath(base))}
        literals = sorted(pairs | {(url.removesuffix("/v1"), "<FAKE_URL>")}, key=lambda pair: -len(pair[0]))
        if raw.exists():
            text = normalize(raw.read_text(encoding="utf-8"), literals)
            json.loads(text)  # the placeholders must leave valid JSON behind
            (out / f"{name}.json").write_text(text, encoding="utf-8")
        stderr = normalize("\n".join(proc.stderr.splitlines()[:STDERR_LINES]), literals)
        (out / f"{name}.meta").write_text(
            f"config: {rel}\nexit code: {proc.returncode}\nresults json: {'yes' if raw.exists() else 'no'}\n"
            f"stderr (first {STDERR_LINES} lines):\n{stderr}\n", encoding="utf-8")
        print(f"ran  {rel}: exit {proc.returncode}{'' if raw.exists() else ', no results JSON'}")
    return 0


def compare(dir_a: Path, dir_b: Path, context_lines: int = 40) -> int:
    names = sorted({p.stem for d in (dir_a, dir_b) for p in d.iterdir() if p.suffix in (".json", ".meta")})
    differ = 0
    for name in names:
        diffs = []
        for suffix in (".json", ".meta"):
            a, b = dir_a / f"{name}{suffix}", dir_b / f"{name}{suffix}"
            if a.exists() != b.exists():  # a run that wrote no results JSON: say so, not a whole-file diff
                diffs.append(f"only in {a if a.exists() else b}\n")
            elif a.exists():
                ta, tb = (p.read_text(encoding="utf-8").splitlines(keepends=True) for p in (a, b))
                diffs += difflib.unified_diff(ta, tb, str(a), str(b), n=2)
        differ += bool(diffs)
        print(f"{'different' if diffs else 'identical'}  {name}")
        if diffs:
            excerpt = diffs[:context_lines]
            sys.stdout.write("".join(line if line.endswith("\n") else line + "\n" for line in excerpt))
            if len(diffs) > context_lines:
                print(f"    ... {len(diffs) - context_lines} more diff lines")
    print(f"{len(names) - differ} identical, {differ} different")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", type=Path, help="the tree to run (its factcli, configs and fake server)")
    parser.add_argument("--out", type=Path, help="where to write <name>.json and <name>.meta")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("DIR_A", "DIR_B"))
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if not (args.src and args.out):
        parser.error("give --src TREE --out DIR, or --compare DIR_A DIR_B")
    return run_tree(args.src, args.out)


if __name__ == "__main__":
    sys.exit(main())
