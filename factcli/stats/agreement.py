"""Agreement of a binary grader with human labels: accuracy, macro-F1, FPR and FNR (the positive
class is "pass"), Cohen's kappa, and FActScore's error rate."""

from __future__ import annotations


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def binary_metrics(tp: int, fn: int, fp: int, tn: int) -> dict:
    """Agreement of a binary grader with gold labels (positive = pass). A metric whose denominator
    is zero is None (undefined), never 0: a set with no gold negatives has no false-positive rate.

    Written out rather than taken from scikit-learn (not a dependency): each is one ratio over the
    2x2 table, and tests check them against hand computations and the FACTS paper's Table 2."""
    n = tp + fn + fp + tn
    f1_pos = _ratio(2 * tp, 2 * tp + fp + fn)
    f1_neg = _ratio(2 * tn, 2 * tn + fn + fp)
    accuracy = _ratio(tp + tn, n)
    kappa = None
    if n:
        expected = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
        kappa = None if expected == 1 else (accuracy - expected) / (1 - expected)
    pred, gold = _ratio(tp + fp, n), _ratio(tp + fn, n)
    return {
        "n": n, "confusion": {"tp": tp, "fn": fn, "fp": fp, "tn": tn},
        "macroF1": None if f1_pos is None or f1_neg is None else (f1_pos + f1_neg) / 2,
        "accuracy": accuracy, "fpr": _ratio(fp, fp + tn), "fnr": _ratio(fn, fn + tp),
        "f1Positive": f1_pos, "f1Negative": f1_neg, "kappa": kappa,
        "predictedPositiveRate": pred, "goldPositiveRate": gold,
        # FActScore's ER = |FS − FS_est| with FS the share of positives: here the pass rate the
        # grader reports against the one people gave, over the items the grader judged.
        "errorRate": None if pred is None else abs(pred - gold),
        "bias": None if pred is None else pred - gold,
    }
