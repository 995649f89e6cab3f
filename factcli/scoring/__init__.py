"""Scoring: the assertion registry and the context a handler gets, the one scoring runner (weights,
thresholds, assert-sets, named scores), named and derived metrics, grader plumbing and judge panels."""
