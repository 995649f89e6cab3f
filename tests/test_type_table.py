"""The type table (scoring/registry.TYPES): every fact about an assertion type that a run needs before
importing the type's family is declared there once, and each registration is checked against it."""

from __future__ import annotations

import pytest

from factcli.config.testsets import assertion_from_string
from factcli.scoring import registry
from factcli.scoring.registry import TYPES, TypeFacts


def test_every_registered_type_is_in_the_table_with_the_module_that_registers_it():
    """Importing every family runs each registration's check; then the table and the registry name the
    same types, each registered by the module the table says (a run imports only that module)."""
    registry.load_all()
    registered = set(registry._REGISTRY) | set(registry._ALIASES)
    assert registered == {name for name, facts in TYPES.items() if facts.family}
    for name in registered:
        kind = registry._REGISTRY[registry._ALIASES.get(name, name)]
        assert kind.handler.__module__ == f"factcli.{TYPES[name].family}", name
        assert kind.model_graded == TYPES[name].model_graded, name
    assert not registered & set(registry.UNSUPPORTED)
    assert set(registry.FAMILIES) == {facts.family for facts in TYPES.values() if facts.family}


def _handler(ctx):
    return ctx.result(True, "")


def test_a_registration_that_disagrees_with_the_table_is_refused(monkeypatch):
    monkeypatch.setitem(TYPES, "made-up", TypeFacts("assertions.graded", model_graded=True))
    monkeypatch.setattr(_handler, "__module__", "factcli.assertions.graded")
    with pytest.raises(RuntimeError, match="made-up.*model_graded=False.*TYPES says True"):
        registry.assertion("made-up")(_handler)
    monkeypatch.undo()
    monkeypatch.setitem(TYPES, "made-up", TypeFacts("assertions.graded", model_graded=True))
    with pytest.raises(RuntimeError, match="made-up.*registered in .*test_type_table.*factcli.assertions.graded"):
        registry.assertion("made-up", model_graded=True)(_handler)
    with pytest.raises(RuntimeError, match="'not-in-table' has no family in registry.TYPES"):
        registry.assertion("not-in-table")(_handler)
    with pytest.raises(RuntimeError, match="'agent-rubric' has no family"):  # a promptfoo type factcli does not run
        registry.check_assertion("agent-rubric")(lambda a, v: (bool, ""))
    assert "made-up" not in registry._REGISTRY and "not-in-table" not in registry._REGISTRY


@pytest.mark.parametrize("cell, expected", [
    ("similar:cosine:x", {"type": "similar", "threshold": 0.8, "value": "cosine:x"}),
    ("not-starts-with:abc", {"type": "not-starts-with", "threshold": 0.75, "value": "abc"}),
    ("latency(500)", {"type": "latency", "threshold": 500.0}),
    ("contains-all:a,b", {"type": "contains-all", "value": ["a", "b"]}),
    ("llm-rubric(0.5):polite", {"type": "llm-rubric", "value": "polite"}),
    ("agent-rubric:x", {"type": "agent-rubric", "value": "x"}),  # promptfoo's, refused later as unknown
    ("factscore:x", {"type": "equals", "value": "factscore:x"}),  # factcli's own: not in promptfoo's grammar
])
def test_the_csv_cell_grammar_reads_the_table(cell, expected):
    assert assertion_from_string(cell) == expected
