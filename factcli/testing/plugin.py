"""factcli's pytest plugin, registered by the `pytest11` entry point, so it is on in every pytest
session of an environment that has factcli, with no `-p` flag (`-p no:factcli` turns it off).

- `--factcli-config FILE` (repeatable): one pytest item per row of the config (testing/rows.py),
  named `description [column]`, so `-k`, `-x`, `--junitxml` and CI gates work as for any test. The
  rows left after `-k` run together, concurrently, as one stored run.
- `--factcli-grader PROVIDER` (or the ini key `factcli_grader`): the grader of those rows and of
  the `factcli_grader` fixture.
- fixtures: `factcli_cache_dir` (session: the response cache under pytest's cache folder,
  `.pytest_cache/d/factcli`, so a judge's answer is paid once, across runs; `--cache-clear` empties
  it) and `factcli_grader` (session: a testing.Checker on that grader and that cache).

This module imports only pytest: a session that uses none of it loads nothing of factcli's
machinery (benchmarks/README.md has the figures).
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser) -> None:
    group = parser.getgroup("factcli", "factcli: LLM evals as tests")
    group.addoption("--factcli-config", action="append", default=[], metavar="FILE",
                    help="Collect one test per row of this factcli (promptfoo) config; repeatable.")
    group.addoption("--factcli-grader", default=None, metavar="PROVIDER",
                    help="The grader of model-graded assertions (--factcli-config rows, factcli_grader fixture).")
    parser.addini("factcli_grader", "The grader of model-graded assertions (as --factcli-grader).", default=None)


def grader_of(config) -> str | None:
    return config.getoption("factcli_grader") or config.getini("factcli_grader") or None


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect: they apply to these items too
def pytest_collection_modifyitems(session, config, items) -> None:
    paths = config.getoption("factcli_config")
    if paths:
        from factcli.testing.rows import collect

        items.extend(collect(session, paths, grader_of(config)))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    for line in getattr(config, "_factcli_notes", ()):
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def factcli_cache_dir(request, tmp_path_factory):
    """The folder of the grader's response cache: pytest's cache folder (kept between runs), or a
    folder of this session when the cache plugin is off (-p no:cacheprovider)."""
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        return cache.mkdir("factcli")
    return tmp_path_factory.mktemp("factcli-cache")


@pytest.fixture(scope="session")
def factcli_grader(request, factcli_cache_dir):
    """A testing.Checker: check(), assert_passes(), assert_factual(), assert_rubric() with the
    session's grader (--factcli-grader, ini factcli_grader, else FACTCLI_GRADER and factcli's default)
    and its response cache."""
    from factcli.testing import Checker

    return Checker(grader=grader_of(request.config), cache_dir=factcli_cache_dir)
