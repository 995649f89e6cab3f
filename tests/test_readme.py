"""README.md must keep up with the code: every assertion type and environment variable is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from factcli.scoring import registry

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
SOURCE = ROOT / "factcli"

# An environment variable name as a string literal in factcli's source: os.environ.get("FACTCLI_X"),
# env_float("FACTCLI_X", …), ("FACTCLI_X", "OTHER") tuples, …
_ENV_LITERAL = re.compile(r"""["'](FACTCLI_[A-Z0-9_]+)["']""")


def _code_spans(text: str) -> set[str]:
    """Everything written as `code` in the README (inline code spans), plus the words inside them."""
    spans = set(re.findall(r"`([^`\n]+)`", text))
    words = {w for s in spans for w in re.findall(r"[A-Za-z0-9_:.\-]+", s)}
    return spans | words


def _env_vars_read() -> set[str]:
    names: set[str] = set()
    for path in SOURCE.rglob("*.py"):
        names.update(_ENV_LITERAL.findall(path.read_text(encoding="utf-8")))
    return names


def test_the_source_scan_finds_env_vars():
    found = _env_vars_read()
    assert {"FACTCLI_HOME", "FACTCLI_GRADER", "FACTCLI_NODE"} <= found, found


@pytest.mark.parametrize("name", sorted(_env_vars_read()))
def test_every_factcli_env_var_is_documented(name):
    assert f"`{name}`" in README or f"`{name}=" in README, f"README.md does not document the environment variable {name}"


@pytest.mark.parametrize("name", registry.known_types())
def test_every_assertion_type_is_documented(name):
    assert name in _code_spans(README), f"README.md does not document the assertion type {name!r}"


@pytest.mark.parametrize("name", sorted(registry.UNSUPPORTED))
def test_every_unsupported_type_is_named(name):
    assert name in _code_spans(README), f"README.md does not say that {name!r} is not supported"


def test_known_types_are_the_registry():
    # the test above must see aliases too (model-graded-factuality, is-valid-function-call, similar:cosine)
    types = set(registry.known_types())
    assert {"model-graded-factuality", "is-valid-function-call", "similar:cosine", "factscore",
            "facts-grounding"} <= types
