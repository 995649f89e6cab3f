"""Assertion types. A family (module) is imported, registering its types, the first time `lookup`
meets one of them; `load_all()` imports every built-in family."""

from factcli.scoring import registry as core
from factcli.scoring.registry import assertion, known_types, load_all, lookup, run_assertions

__all__ = ["assertion", "core", "known_types", "load_all", "lookup", "run_assertions"]
