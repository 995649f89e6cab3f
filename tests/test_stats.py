"""Uncertainty: intervals against known distributions, pass@k / pass^k / flip rate by hand, and
what the summary, `view`, `diff` and the results JSON show."""

import json
import math
import re

import numpy as np
import pytest
from conftest import write
from typer.testing import CliRunner

from factcli import stats
from factcli.cli import app
from factcli.report import figures
from factcli.store.database import Store

runner = CliRunner()


def cli(*args, env=None):
    return runner.invoke(app, [*map(str, args)], env=env or {"COLUMNS": "200"})


def latest_id() -> str:
    with Store.open() as store:
        return store.resolve("latest")["id"]


# ---------------------------------------------------------------- intervals against known distributions


def test_wald_interval_covers_a_binomial_proportion_95_percent_of_the_time():
    rng = np.random.default_rng(1)
    p, n = 0.8, 200
    hits = 0
    for passes in rng.binomial(n, p, size=2000):
        ci = stats.wald_interval(int(passes), n)
        hits += ci["low"] <= p <= ci["high"]
    assert 0.93 <= hits / 2000 <= 0.97


def _wilson_by_hand(x: int, n: int) -> tuple[float, float]:
    """Wilson's formula written out: (x + z²/2 ± z·√(x(n−x)/n + z²/4)) / (n + z²), z = 1.96."""
    z = 1.96
    centre, half = x + z * z / 2, z * math.sqrt(x * (n - x) / n + z * z / 4)
    return (centre - half) / (n + z * z), (centre + half) / (n + z * z)


def test_wilson_interval_at_the_edges_against_values_computed_by_hand():
    """0/n and n/n never give a zero-width interval; one row gives a wide one (issue 40)."""
    # 0 of 6: [0, z²/(n + z²)] = [0, 3.8416/9.8416]; 6 of 6 mirrors it: 1 − 0.390343 = 0.609657
    assert stats.wilson_interval(0, 6)["low"] == 0.0
    assert stats.wilson_interval(0, 6)["high"] == pytest.approx(0.390343, abs=1e-6)
    assert stats.wilson_interval(6, 6)["low"] == pytest.approx(0.609657, abs=1e-6)
    assert stats.wilson_interval(6, 6)["high"] == 1.0
    # one row: 1/1 is [1 − 1.9208/4.8416, 1] = [0.206543, 1]; 0/1 is [0, 0.793457]
    assert (stats.wilson_interval(1, 1)["low"], stats.wilson_interval(1, 1)["high"]) == pytest.approx((0.206543, 1.0), abs=1e-6)
    assert (stats.wilson_interval(0, 1)["low"], stats.wilson_interval(0, 1)["high"]) == pytest.approx((0.0, 0.793457), abs=1e-6)
    for x, n in ((0, 6), (6, 6), (1, 1), (0, 1), (3, 6), (7, 10), (0, 500), (500, 500)):
        ci = stats.wilson_interval(x, n)
        assert (ci["low"], ci["high"]) == pytest.approx(_wilson_by_hand(x, n), abs=1e-12)
        assert ci["high"] - ci["low"] > 0 and ci["method"] == "wilson" and ci["small"] == (n < stats.SMALL_SAMPLE)
    assert stats.wilson_interval(0, 0) is None
    assert figures.fmt_rate(1.0, [0.609657, 1.0]) == "100.0% [61.0, 100.0]"
    assert figures.run_rate(6, 6) == "100.00% [61.0, 100.0] (95% CI)"
    assert figures.run_rate(1, 1) == "100.00% [20.7, 100.0] (95% CI)"
    assert figures.run_rate(0, 40) == "0.00% [0.0, 8.8] (95% CI)"
    assert figures.small_sample([1]) == "Small sample (1 row): wide intervals; read them, not the rates."
    assert figures.small_sample([40, 6]).startswith("Small sample (6 rows a column):")
    assert figures.small_sample([30, 40]) is None and figures.small_sample([]) is None


def test_wilson_interval_covers_a_small_binomial_sample_close_to_95_percent():
    """Where the normal interval is known to fail (N = 20, p = 0.95: about 64% coverage), Wilson's holds."""
    rng = np.random.default_rng(3)
    p, n, trials = 0.95, 20, 4000
    draws = rng.binomial(n, p, size=trials)
    wilson = sum(stats.wilson_interval(int(x), n)["low"] <= p <= stats.wilson_interval(int(x), n)["high"] for x in draws)
    wald = sum(stats.wald_interval(int(x), n)["low"] <= p <= stats.wald_interval(int(x), n)["high"] for x in draws)
    assert wilson / trials >= 0.92 and wald / trials < 0.8


def test_newcombe_differences_match_newcombes_worked_examples():
    """Newcombe 1998a (Stat Med 17:873), method 10: 56/70 − 48/80 = 0.2, [0.0524, 0.3339]; Newcombe 1998b
    (Stat Med 17:2635), method 10, paired e=36, f=12, g=2, h=0 (n=50): 0.2, [0.0569, 0.3404]. factcli's
    difference is B − A, so A is the second sample."""
    apart = stats.newcombe_difference(48, 80, 56, 70)
    assert apart["delta"] == pytest.approx(0.2) and apart["ci95"] == pytest.approx([0.0524, 0.3339], abs=5e-5)
    assert apart["method"] == "newcombe" and apart["beyondNoise"]
    pairs = [(1, 1)] * 36 + [(0, 1)] * 12 + [(1, 0)] * 2 + [(0, 0)] * 0
    paired = stats.newcombe_paired(pairs)
    assert paired["delta"] == pytest.approx(0.2) and paired["ci95"] == pytest.approx([0.0569, 0.3404], abs=5e-5)
    # both runs pass every row: Δ = 0 with an interval around it, never [0, 0]
    same = stats.newcombe_paired([(1, 1)] * 6)
    assert same["delta"] == 0 and same["ci95"][0] < 0 < same["ci95"][1] and same["verdict"] == "within noise"
    assert stats.newcombe_difference(6, 6, 0, 6)["ci95"][1] < 0  # 6/6 → 0/6 is beyond noise


def _newcombe_cells(a: int, b: int, c: int, d: int) -> list[tuple[int, int]]:
    """Pairs for Newcombe's 2×2 table (a both positive, b first only, c second only, d neither), whose
    difference is first − second: factcli's is B − A, so the first is B."""
    return [(1, 1)] * a + [(0, 1)] * b + [(1, 0)] * c + [(0, 0)] * d


@pytest.mark.parametrize("cells, delta, published, digits", [
    # Newcombe 1998b (Stat Med 17:2635), method 10; 18/12/2/18 and 53/0/0/1 have eh > fg, where the
    # continuity-corrected φ* widens the interval (uncorrected: [0.0618, 0.3239] and ±0.0640)
    ((36, 12, 2, 0), 0.2, (0.0569, 0.3404), 4),
    ((18, 12, 2, 18), 0.2, (0.0562, 0.3290), 4),
    ((53, 0, 0, 1), 0.0, (-0.0729, 0.0729), 4),
    # Newcombe's example as R's ratesci tests it (method 10: 0.0562, 0.3292; method 8 would be 0.3242)
    ((20, 12, 2, 16), 0.2, (0.0562, 0.3292), 4),
    # Fagerland, Lydersen & Laud 2014 (Stat Methods Med Res), Bentur et al's table, "MOVER Wilson"
    # with Newcombe's corrected correlation: (−0.507, −0.026)
    ((1, 1, 7, 12), -6 / 21, (-0.507, -0.026), 3),
    # Tang, Li & Tang 2010's example, (−0.1574, 0.4136) as ratesci reproduces it
    ((8, 3, 1, 2), 2 / 14, (-0.1574, 0.4136), 4),
    # Chang et al. 2024's example (0.133, 0.318), Newcombe's correction applied, as ratesci reads it
    ((7, 25, 2, 68), 23 / 102, (0.133, 0.318), 3),
])
def test_newcombe_paired_reproduces_published_intervals(cells, delta, published, digits):
    r = stats.newcombe_paired(_newcombe_cells(*cells))
    assert r["delta"] == pytest.approx(delta) and r["method"] == "newcombe paired"
    assert r["ci95"] == pytest.approx(list(published), abs=0.5 * 10 ** -digits)  # as printed, rounded


def test_newcombe_paired_correlation_is_corrected_only_when_eh_exceeds_fg():
    # cells e, f, g, h as factcli counts them (both pass, A only, B only, neither)
    assert stats.intervals.paired_correlation(18, 2, 12, 18) == pytest.approx((18 * 18 - 24 - 25) / 600)
    assert stats.intervals.paired_correlation(53, 0, 0, 1) == pytest.approx(26 / 53)  # 53 − 54/2 = 26
    # eh − fg between 0 and n/2: corrected to 0, the rates treated as uncorrelated
    assert stats.intervals.paired_correlation(5, 2, 2, 1) == 0.0  # eh − fg = 1 ≤ 5
    # eh < fg: φ as it is (Newcombe corrects only the positive side)
    assert stats.intervals.paired_correlation(36, 2, 12, 0) == pytest.approx(-24 / (38 * 12 * 48 * 2) ** 0.5)
    assert stats.intervals.paired_correlation(6, 0, 0, 0) == 0.0  # an empty margin


def test_a_paired_difference_of_noise_is_within_noise():
    """30 rows pass in both runs, 3 only in A, 10 only in B, 7 in neither (n = 50): +14 points with
    [−0.32, +27.75]: within noise, so `diff --fail-on-regression` must not call it a change (the
    uncorrected φ gave [+0.25, +27.28], beyond noise)."""
    pairs = [(1, 1)] * 30 + [(1, 0)] * 3 + [(0, 1)] * 10 + [(0, 0)] * 7
    r = stats.newcombe_paired(pairs)
    assert r["delta"] == pytest.approx(0.14) and r["ci95"] == pytest.approx([-0.0032, 0.2775], abs=5e-5)
    assert r["verdict"] == "within noise"
    flipped = stats.newcombe_paired([(y, x) for x, y in pairs])  # the same runs the other way round
    assert flipped["ci95"] == pytest.approx([-0.2775, 0.0032], abs=5e-5) and not flipped["beyondNoise"]


def test_bootstrap_of_a_continuous_mean_covers_95_percent_of_the_time():
    """Scores from Beta(2, 5) (mean 2/7): every sample has more distinct values than the
    multinomial shortcut takes, so this checks the row-resampling path."""
    rng = np.random.default_rng(2)
    hits, trials = 0, 600
    for _ in range(trials):
        ci = stats.bootstrap_mean(rng.beta(2, 5, size=100))
        hits += ci["low"] <= 2 / 7 <= ci["high"]
    assert 0.92 <= hits / trials <= 0.97


def test_bootstrap_of_a_few_valued_mean_covers_95_percent_of_the_time():
    """Scores on a 5-point scale: the multinomial-per-distinct-value path."""
    rng = np.random.default_rng(3)
    values, probs = np.array([0, 0.25, 0.5, 0.75, 1.0]), np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    true = float(values @ probs)
    hits, trials = 0, 600
    for _ in range(trials):
        ci = stats.bootstrap_mean(rng.choice(values, size=60, p=probs))
        hits += ci["low"] <= true <= ci["high"]
    assert 0.93 <= hits / trials <= 0.97


def test_bootstrap_keeps_repeats_of_a_test_together():
    """40 tests of different difficulty, each answered 3 times with small variation (true mean
    0.5): resampling tests with their repeats covers 95%; treating the 120 rows as independent
    would be far too narrow."""
    rng = np.random.default_rng(8)
    tests, repeats, trials = 40, 3, 300
    hits = {"tests": 0, "rows": 0}
    for _ in range(trials):
        mu = 0.05 + 0.9 * rng.beta(2, 2, size=tests)
        scores = mu[:, None] + rng.uniform(-0.05, 0.05, size=(tests, repeats))
        by_test = stats.bootstrap_cluster_mean(scores.sum(axis=1), [repeats] * tests)
        by_row = stats.bootstrap_mean(scores.ravel())
        hits["tests"] += by_test["low"] <= 0.5 <= by_test["high"]
        hits["rows"] += by_row["low"] <= 0.5 <= by_row["high"]
    assert 0.92 <= hits["tests"] / trials <= 0.97
    assert hits["rows"] / trials < 0.85


def test_paired_and_unpaired_differences_cover_the_true_difference():
    """Tests of varying difficulty d ~ U(0.2, 0.9); run B passes each with d + 0.05, so the true
    difference is 0.05. Pairing removes the difficulty from the noise: close to 95% and narrower;
    resampling the runs apart ignores that they share tests, so it is wider and over-covers."""
    rng = np.random.default_rng(4)
    hits = {"paired": 0, "apart": 0}
    widths = {"paired": [], "apart": []}
    trials, n = 400, 100
    for _ in range(trials):
        d = rng.uniform(0.2, 0.9, size=n)
        a = (rng.random(n) < d).astype(float)
        b = (rng.random(n) < d + 0.05).astype(float)
        paired = stats.difference(None, None, paired={str(i): [(a[i], b[i])] for i in range(n)})
        apart = stats.difference({str(i): [a[i]] for i in range(n)}, {str(i): [b[i]] for i in range(n)})
        for name, r in (("paired", paired), ("apart", apart)):
            hits[name] += r["ci95"][0] <= 0.05 <= r["ci95"][1]
            widths[name].append(r["ci95"][1] - r["ci95"][0])
    assert 0.93 <= hits["paired"] / trials <= 0.98 and hits["apart"] / trials >= 0.93
    assert np.mean(widths["paired"]) < np.mean(widths["apart"])
    assert paired["method"] == "paired bootstrap" and apart["method"] == "bootstrap"


def test_facts_table_5_interval():
    """FACTS Grounding, Table 5: 91.4% on N = 860 is ±1.9 (the paper's normal interval)."""
    assert round(100 * stats.wald_margin(0.914, 860), 1) == 1.9
    from factcli.methods.facts_grounding import facts_interval

    assert facts_interval is stats.wald_margin  # one implementation for every report
    assert math.isnan(stats.wald_margin(0.5, 0)) and stats.wald_interval(0, 0) is None
    ci = stats.wald_interval(1, 1)  # bounds clipped to [0, 1]
    assert ci["low"] == ci["high"] == 1.0 and ci["margin"] == 0


def test_bootstrap_is_seeded_and_ignores_row_order():
    rng = np.random.default_rng(5)
    values = list(rng.beta(2, 5, size=300))
    first = stats.bootstrap_mean(values)
    assert stats.bootstrap_mean(values) == first
    assert stats.bootstrap_mean(list(reversed(values))) == first  # rows finish in any order
    assert first["resamples"] == stats.RESAMPLES == 2000 and first["low"] < first["value"] < first["high"]
    few = [0, 0.5, 1, 0.5, 0.5, 1, 0]
    assert stats.bootstrap_mean(few) == stats.bootstrap_mean(sorted(few))
    assert stats.bootstrap_mean([]) is None
    assert stats.bootstrap_mean([0.3, 0.3]) == {"value": 0.3, "low": 0.3, "high": 0.3, "method": "bootstrap",
                                                "resamples": 2000}


def test_differences_say_beyond_or_within_noise():
    same = {str(i): [(1.0, 1.0)] if i % 2 else [(0.0, 0.0)] for i in range(50)}
    r = stats.difference(None, None, paired=same)
    assert r["delta"] == 0 and r["ci95"] == [0, 0] and not r["beyondNoise"] and r["verdict"] == "within noise"
    fixed = {str(i): [(0.0, 1.0)] if i < 30 else [(1.0, 1.0)] for i in range(50)}
    r = stats.difference(None, None, paired=fixed)
    assert r["delta"] == pytest.approx(0.6) and r["ci95"][0] > 0 and r["verdict"] == "beyond noise"
    small = stats.difference({"a": [1.0], "b": [0.0]}, {"a": [1.0], "b": [1.0]})
    assert small["delta"] == 0.5 and small["verdict"] == "within noise"
    assert stats.difference({}, {"a": [1.0]}) is None and stats.difference(None, None, paired={}) is None


# ---------------------------------------------------------------- repeats


def test_pass_at_k_and_pass_hat_k_by_hand():
    # n = 5 samples, c = 2 pass: pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass^2 = C(2,2)/C(5,2) = 1/10
    assert stats.pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert stats.pass_hat_k(5, 2, 2) == pytest.approx(0.1)
    assert stats.pass_at_k(5, 2, 1) == pytest.approx(0.4) == stats.pass_hat_k(5, 2, 1)  # k = 1: the pass rate
    assert stats.pass_at_k(5, 2, 4) == 1.0  # only 3 failures: any 4 include a pass
    assert stats.pass_at_k(3, 0, 3) == 0.0 and stats.pass_hat_k(3, 3, 3) == 1.0 and stats.pass_hat_k(3, 2, 3) == 0
    assert stats.pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)  # C(7,5)/C(10,5)
    with pytest.raises(ValueError):
        stats.pass_at_k(3, 1, 4)


def test_repeat_stats_average_over_tests_and_count_flips():
    # three tests with 3 repeats: always passes, never passes, passes once
    r = stats.repeat_stats([(3, 3), (3, 0), (3, 1)], 3)
    assert r["passAtK"]["1"] == pytest.approx((1 + 0 + 1 / 3) / 3)
    assert r["passAtK"]["2"] == pytest.approx((1 + 0 + (1 - 1 / 3)) / 3)  # (3,1): 1 - C(2,2)/C(3,2)
    assert r["passAtK"]["3"] == pytest.approx(2 / 3)
    assert r["passHatK"]["3"] == pytest.approx(1 / 3) and r["passHatK"]["2"] == pytest.approx(1 / 3)
    assert r["flipRate"] == pytest.approx(1 / 3) and r["flakyTests"] == 1 and r["repeatedTests"] == 3
    # a test cut short (2 of 3 rows done) counts for k <= 2 only
    r = stats.repeat_stats([(3, 3), (2, 1)], 3)
    assert r["passAtK"]["3"] == 1.0 and r["passAtK"]["2"] == pytest.approx((1 + 1) / 2)
    assert r["flipRate"] == 0.5
    assert stats.repeat_stats([(1, 1)], 1) is None


def test_column_stats_intervals_by_kind_of_score():
    binary = [stats.Cluster() for _ in range(10)]
    for i, c in enumerate(binary):
        c.add(i < 7, 1.0 if i < 7 else 0.0)
    st = stats.column_stats(binary)
    assert st["passRate"] == 0.7 and st["passRateCi95"] == pytest.approx(list(_wilson_by_hand(7, 10)))
    assert st["scoreBinary"] is True and st["scoreCi95Method"] == "wilson" and st["scoreCi95"] == st["passRateCi95"]
    assert "passAtK" not in st
    graded = [stats.Cluster() for _ in range(10)]
    for i, c in enumerate(graded):
        c.add(i >= 5, i / 10)
    graded[0].add(False, math.nan)  # a NaN score is left out of the mean, not counted as 0
    st = stats.column_stats(graded)
    assert st["scoreBinary"] is False and st["scoreCi95Method"] == "bootstrap" and st["scoreN"] == 10
    assert st["scoreMean"] == pytest.approx(0.45) and st["scoreCi95"][0] < 0.45 < st["scoreCi95"][1]
    assert st["n"] == 11 and st["passes"] == 5


def test_row_stats_match_one_cluster_per_row():
    """The no-repeat fast path gives what the general one does with each row its own test."""
    rng = np.random.default_rng(6)
    for scores in (list(rng.beta(2, 5, size=150)), [0.0, 0.5, 1.0] * 30, [1.0, 0.0] * 40):
        clusters = []
        for x in scores:
            c = stats.Cluster()
            c.add(x >= 0.5, x)
            clusters.append(c)
        fast = stats.row_stats(len(scores), sum(x >= 0.5 for x in scores), scores)
        assert fast == stats.column_stats(clusters)


# ---------------------------------------------------------------- the commands

FLAKY = """
calls = {}

def call_api(prompt, options, context):
    # the n-th call for a prompt: "steady" always right, "flaky" right on every other call
    n = calls[prompt] = calls.get(prompt, 0) + 1
    if "steady" in prompt or n % 2:
        return {"output": "Paris"}
    return {"output": "Lyon"}
"""

REPEAT_CONFIG = """
description: repeats
prompts: ["{{kind}} {{q}}"]
providers: ["file://flaky.py"]
tests:
  - vars: {kind: steady, q: one}
    assert: [{type: contains, value: Paris}]
  - vars: {kind: flaky, q: two}
    assert: [{type: contains, value: Paris}]
  - vars: {kind: never, q: three}
    assert: [{type: contains, value: Berlin}]
"""


def repeat_run(tmp_path, *extra):
    write(tmp_path / "flaky.py", FLAKY)
    cfg = write(tmp_path / "c.yaml", REPEAT_CONFIG)
    out = tmp_path / "r.json"
    result = cli("eval", "-c", cfg, "--repeat", "3", "-j", "1", "--no-progress-bar", "--no-table", "-o", out, *extra)
    assert result.exit_code == 100, result.output
    return result.output, json.loads(out.read_text())


def test_repeat_statistics_in_the_summary_results_json_and_view(tmp_path):
    """steady: 3/3; flaky: calls 1 and 3 of its prompt pass (2/3); never: 0/3 -> 5 of 9 rows."""
    output, doc = repeat_run(tmp_path)
    col = doc["factcli"]["columns"][0]
    assert col["n"] == 9 and col["passes"] == 5 and col["repeat"] == 3
    assert col["passRateCi95"] == pytest.approx(list(_wilson_by_hand(5, 9))) and col["passRateCi95Method"] == "wilson"
    # per test (n=3): steady c=3, flaky c=2, never c=0
    assert col["passAtK"]["3"] == pytest.approx((1 + 1 + 0) / 3)
    assert col["passAtK"]["2"] == pytest.approx((1 + 1 + 0) / 3)  # flaky: 1 - C(1,2)/C(3,2) = 1
    assert col["passHatK"]["3"] == pytest.approx(1 / 3)
    assert col["passHatK"]["2"] == pytest.approx((1 + 1 / 3 + 0) / 3)  # flaky: C(2,2)/C(3,2)
    assert col["flipRate"] == pytest.approx(1 / 3) and col["flakyTests"] == 1 and col["repeatedTests"] == 3
    assert "methods" in col and col["scoreBinary"] is True
    assert doc["factcli"]["passRateCi95"] == pytest.approx(col["passRateCi95"])
    assert "Pass rate: 55.56% [26.7, 81.1] (95% CI)" in output and "Small sample (9 rows): wide intervals" in output
    assert re.search(r"5/9\s*[│|]\s*55\.6% \[26\.7, 81\.1\]\s*[│|]\s*0\.556\s*[│|]\s*66\.7%\s*[│|]\s*33\.3%\s*[│|]\s*33\.3% \(1/3\)", output), output
    assert "pass@3" in output and "pass^3" in output and "flip rate" in output
    assert "95% intervals: pass rate [Wilson score, points]" in output

    view = cli("view").output
    assert "pass rate 55.56% [26.7, 81.1] (95% CI)" in view
    assert re.search(r"55\.6% \[26\.7, 81\.1\]\s*\|\s*5/4/0\s*\|\s*0\.556\s*\|\s*66\.7%\s*\|\s*33\.3%\s*\|\s*33\.3% \(1/3\)", view), view
    shown = json.loads(cli("view", "--json").output)["columns"][0]
    assert shown["passRateCi95"] == pytest.approx(col["passRateCi95"])
    assert shown["stats"]["passAtK"] == pytest.approx(col["passAtK"])
    assert shown["stats"]["flipRate"] == pytest.approx(1 / 3)


def _drop_stored_stats(run_id: str) -> None:
    """Make the run look like one still being written, or stored by an older factcli."""
    from factcli.store.records import metrics_from_json, metrics_to_json

    with Store.open() as store:
        metrics = [metrics_from_json(c["metrics_json"]) for c in store.columns(run_id)]
        for m in metrics:
            m.stats = {}
        store.set_column_metrics(run_id, [metrics_to_json(m) for m in metrics])


def assert_same_stats(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for key, value in want.items():
        if isinstance(value, dict):
            assert got[key] == pytest.approx(value), key
        elif isinstance(value, (int, float, list)) and not isinstance(value, bool):
            assert got[key] == pytest.approx(value), key
        else:
            assert got[key] == value, key


def test_view_computes_the_same_statistics_from_the_rows_when_none_are_stored(tmp_path):
    _, doc = repeat_run(tmp_path)
    stored = json.loads(cli("view", "--json").output)["columns"][0]["stats"]
    _drop_stored_stats(latest_id())
    from_rows = json.loads(cli("view", "--json").output)["columns"][0]["stats"]
    assert_same_stats(from_rows, stored)

    _, graded = graded_run(tmp_path)
    stored = json.loads(cli("view", "--json").output)["columns"][0]["stats"]
    _drop_stored_stats(latest_id())
    from_rows = json.loads(cli("view", "--json").output)["columns"][0]["stats"]
    assert_same_stats(from_rows, stored)
    assert from_rows["scoreBinary"] is False and from_rows["scoreCi95Method"] == "bootstrap"
    assert stored["scoreCi95"] == pytest.approx(graded["factcli"]["columns"][0]["scoreCi95"])


def test_view_of_a_big_run_without_stored_statistics_says_when_they_appear(tmp_path, monkeypatch):
    from factcli.report import view as viewer

    repeat_run(tmp_path)
    _drop_stored_stats(latest_id())
    monkeypatch.setattr(viewer, "LIVE_STATS_MAX_ROWS", 5)
    view = cli("view")
    assert view.exit_code == 0 and "55.6% [26.7, 81.1]" in view.output  # from the counts, always
    assert "are shown once it has finished" in view.output and "pass@3" not in view.output
    assert json.loads(cli("view", "--json").output)["columns"][0]["stats"] is None


GRADED = """
prompts: ["{{s}}"]
providers: [echo]
tests:
""" + "".join(f"  - vars: {{s: '{s}'}}\n    assert: [{{type: python, value: 'float(output)', threshold: 0.5}}]\n"
              for s in (0.1, 0.35, 0.4, 0.55, 0.6, 0.7, 0.8, 0.9, 0.95, 0.25))


def graded_run(tmp_path):
    out = tmp_path / "g.json"
    result = cli("eval", "-c", write(tmp_path / "g.yaml", GRADED), "--no-progress-bar", "--no-table", "-o", out)
    assert result.exit_code == 100, result.output
    return result.output, json.loads(out.read_text())


def test_non_binary_scores_get_a_bootstrap_interval(tmp_path):
    output, doc = graded_run(tmp_path)
    col = doc["factcli"]["columns"][0]
    scores = [0.1, 0.35, 0.4, 0.55, 0.6, 0.7, 0.8, 0.9, 0.95, 0.25]
    expected = stats.bootstrap_mean(scores)
    assert col["scoreBinary"] is False and col["scoreCi95Method"] == "bootstrap"
    assert col["scoreMean"] == pytest.approx(np.mean(scores))
    assert col["scoreCi95"] == pytest.approx([expected["low"], expected["high"]])
    lo, hi = col["scoreCi95"]
    assert f"0.560 [{lo:.2f}, {hi:.2f}]" in output and "score [95% CI]" in output
    assert "percentile bootstrap, 2000 resamples" in output and "pass@" not in output
    view = cli("view").output
    assert f"0.560 [{lo:.2f}, {hi:.2f}]" in view and "mean score [95% CI]" in view


def test_binary_single_column_summary_shows_only_the_pass_rate_interval(tmp_path):
    cfg = write(tmp_path / "b.yaml", "prompts: ['{{w}}']\nproviders: [echo]\ntests:\n"
                "  - vars: {w: a}\n    assert: [{type: equals, value: a}]\n"
                "  - vars: {w: b}\n    assert: [{type: equals, value: a}]\n")
    result = cli("eval", "-c", cfg, "--no-progress-bar", "--no-table")
    assert "Pass rate: 50.00% [9.5, 90.5] (95% CI)" in result.output
    assert "pass@" not in result.output and "[95% CI]" not in result.output


def diff_config(tests) -> str:
    # the expected text comes from the environment, so it is not part of a test's key (vars)
    return 'prompts: ["{{a}}"]\nproviders: [echo]\ntests:\n' + "".join(
        f"  - vars: {{a: '{t}'}}\n    assert: [{{type: contains, value: '${{WANT}}'}}]\n" for t in tests)


def diff_json(a: str, b: str) -> dict:
    result = cli("diff", a, b, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["columns"][0]


def test_diff_says_whether_runs_differ_beyond_noise(tmp_path, monkeypatch):
    cfg = write(tmp_path / "d.yaml", diff_config(f"x{i}" for i in range(40)))

    def run(want: str) -> str:
        monkeypatch.setenv("WANT", want)
        cli("eval", "-c", cfg, "--no-progress-bar", "--no-table")
        return latest_id()

    all_pass = run("x")  # every output contains "x"
    again = run("x")
    few = run("x1")  # x1, x10..x19: 11 of 40 pass
    d = diff_json(all_pass, again)["passRate"]
    assert d["delta"] == 0 and d["verdict"] == "within noise" and d["method"] == "newcombe paired"
    assert d["ci95"][0] < 0 < d["ci95"][1]  # never [0, 0], however many rows agree
    d = diff_json(all_pass, few)["passRate"]
    assert d["delta"] == pytest.approx(11 / 40 - 1) and d["beyondNoise"] and d["ci95"][1] < 0
    assert d["method"] == "newcombe paired"
    out = cli("diff", all_pass, few).output
    assert "Δ 95% CI" in out
    line = next(line for line in out.splitlines() if "pass rate" in line)
    assert "-72.5 pts" in line and line.rstrip(" |").endswith("beyond")

    # different tests in the two runs: resampled apart
    write(tmp_path / "d.yaml", diff_config([f"x{i}" for i in range(40)] + ["no match"]))
    other = run("x")
    d = diff_json(all_pass, other)["passRate"]
    assert d["method"] == "newcombe" and d["delta"] == pytest.approx(40 / 41 - 1) and d["verdict"] == "within noise"
    assert diff_json(all_pass, other)["meanScore"]["verdict"] == "within noise"


def test_diff_fail_on_regression_lets_noise_through_with_the_corrected_correlation(tmp_path, monkeypatch):
    """Newcombe's φ* through the CLI: of 50 rows, 30 pass in both runs, 10 only in A, 3 only in B, 7 in
    neither. B − A = −14 points, [−27.75, +0.32]: within noise, so --fail-on-regression exits 0 (the
    uncorrected φ put the upper bound at −0.25 and failed the build)."""
    texts = [f"ab{i}" for i in range(30)] + [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(3)] + \
        [f"z{i}" for i in range(7)]
    cfg = write(tmp_path / "d.yaml", diff_config(texts))
    ids = []
    for want in ("a", "b"):  # A passes the rows holding an "a", B those holding a "b"
        monkeypatch.setenv("WANT", want)
        cli("eval", "-c", cfg, "--no-progress-bar", "--no-table")
        ids.append(latest_id())
    d = diff_json(*ids)["passRate"]
    assert d["method"] == "newcombe paired" and d["delta"] == pytest.approx(-0.14)
    assert d["ci95"] == pytest.approx([-0.2775, 0.0032], abs=5e-5) and d["verdict"] == "within noise"
    result = cli("diff", *ids, "--fail-on-regression")
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if "pass rate" in line)
    assert "-14.0 pts" in line and "[-27.7, +0.3]" in line and line.rstrip(" |").endswith("within")


def test_stats_survive_an_export_of_the_stored_run(tmp_path):
    _, doc = repeat_run(tmp_path)
    out = tmp_path / "export.json"
    assert cli("export", "latest", "-o", out).exit_code == 0
    col = json.loads(out.read_text())["factcli"]["columns"][0]
    assert col["passAtK"] == pytest.approx(doc["factcli"]["columns"][0]["passAtK"])
    assert col["passRateCi95"] == pytest.approx(doc["factcli"]["columns"][0]["passRateCi95"])


def test_help_does_not_import_numpy():
    import subprocess
    import sys

    code = "import sys; from factcli.cli import app; import factcli.stats, factcli.report.view, factcli.report.summary; " \
           "print('numpy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
