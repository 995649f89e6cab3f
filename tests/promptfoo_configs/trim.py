"""Trim a results JSON that promptfoo 0.121.20 wrote into the golden file the tests compare against: the
prompts (label, raw, provider, named scores) and each row's outcome, without run ids, timings or paths.

    python tests/promptfoo_configs/trim.py OUT.json > golden.json
"""

import json
import sys


def trim(data: dict) -> dict:
    results = data["results"]
    prompts = [{"label": p["label"], "raw": p["raw"], "provider": p["provider"],
                "namedScores": (p.get("metrics") or {}).get("namedScores") or {}} for p in results["prompts"]]
    rows = []
    for r in results["results"]:
        response = r.get("response") or {}
        if not isinstance(response, dict):  # a provider that returned a bare value
            response = {"output": None, "returned": response}
        error = r.get("error")
        rows.append({
            "testIdx": r["testIdx"], "promptIdx": r["promptIdx"], "provider": r["provider"],
            "success": r["success"], "failureReason": r["failureReason"], "score": r["score"],
            "output": response.get("output"), "returned": response.get("returned"), "cost": r.get("cost"),
            "tokenUsage": {k: response.get("tokenUsage", {}).get(k) for k in ("total", "prompt", "completion")}
            if response.get("tokenUsage") else None,
            "metadata": response.get("metadata"),
            "error": error.splitlines()[0] if isinstance(error, str) else error,
            "reason": (r.get("gradingResult") or {}).get("reason"),
        })
    rows.sort(key=lambda row: (row["testIdx"], row["promptIdx"]))
    return {"prompts": prompts, "results": rows}


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as fh:
        print(json.dumps(trim(json.load(fh)), indent=1, ensure_ascii=False))
