"""Assertion types. Importing this package registers every built-in family."""

from factcli.assertions import core
from factcli.assertions import graded, operational, scripts, similarity, structured, text  # noqa: F401  (register)
from factcli.assertions.core import assertion, known_types, lookup, run_assertions

__all__ = ["assertion", "core", "known_types", "lookup", "run_assertions"]
