"""Assertion types. Importing this package registers every built-in family."""

from factcli.assertions import core
from factcli.assertions import (  # noqa: F401  (importing registers the types)
    facts_grounding, factscore, factual_correctness, graded, operational, rag, scripts, similarity, structured, text,
)
from factcli.assertions.core import assertion, known_types, lookup, run_assertions

__all__ = ["assertion", "core", "known_types", "lookup", "run_assertions"]
