"""Statistics as pure functions of counts and scores: intervals (Wilson, Wald, bootstrap, differences),
pass@k and repeat statistics, per-column summaries, and pass rates corrected for the judge. `from factcli import stats` gives all of them.
`factcli.stats.text` (sentences, passages and BM25 ranking) is imported by its own name, by what reads text."""

from factcli.stats.columns import Cluster, ColumnSample, column_stats, fill, row_stats, run_interval
from factcli.stats.intervals import (
                                     RESAMPLES,
                                     Z95,
                                     bootstrap_cluster_mean,
                                     bootstrap_mean,
                                     SMALL_SAMPLE,
                                     difference,
                                     newcombe_difference,
                                     newcombe_paired,
                                     percentile_interval,
                                     resample_ratio,
                                     wald_interval,
                                     wald_margin,
                                     wilson_interval,
)
from factcli.stats.judge import JudgeTally, rogan_gladen
from factcli.stats.passk import pass_at_k, pass_hat_k, repeat_stats

__all__ = ["Cluster", "ColumnSample", "JudgeTally", "RESAMPLES", "SMALL_SAMPLE", "Z95", "bootstrap_cluster_mean", "bootstrap_mean", "column_stats",
           "difference", "fill", "newcombe_difference", "newcombe_paired", "pass_at_k", "pass_hat_k", "percentile_interval", "repeat_stats", "resample_ratio", "rogan_gladen",
           "row_stats", "run_interval", "wald_interval", "wald_margin", "wilson_interval"]
