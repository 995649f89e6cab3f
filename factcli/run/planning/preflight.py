"""Preflight: after loading and before the first call, everything that can be checked without
spending money, reported together (exit 1, no call made).

- every model and grader: its vendor is known (with a did-you-mean), its credential is set, its
  script imports (Provider.preflight);
- every `-o` file: a known extension, and it can be created (made and removed again: report/writable);
- every assertion type's own checks (a factscore knowledge source exists and loads);
- the filters keep at least one test;
- and, first, what the load and the var check found and let pass (`run.problems`: unknown
  assertion types, unreadable prompt, provider and test files, misspelled vars), so that one run
  names every problem.

Then, once the run is stored and before its first call, `reach` opens a TCP connection (nothing is
sent, so nothing is billed) to every local or configured server the run's models and graders call: one
that refuses it, has no such host or does not accept within CONNECT_TIMEOUT_S has its circuit breaker
opened (run/calling/breaker.py), so the run stops at once, resumable, before any model is paid.
"""

from __future__ import annotations

import os
from pathlib import Path

from factcli.errors import ConfigProblems
from factcli.types import walk



class PreflightFailed(ConfigProblems):
    """Its message is the count; `problems` holds one line each."""


def output_problem(path: Path, given: str = "-o", probe: bool = True) -> str | None:
    """What stops `path` from being written, or None: a format the exporter does not know, then (with
    `probe`) what creating it finds. A folder that does not exist yet is made when the file is written (as
    promptfoo does); the probe makes it and the file and removes both (report/writable)."""
    from factcli.report.exports import FORMATS as OUTPUT_FORMATS  # the exporter owns the list (imported for -o only)

    if not str(path).lower().endswith(OUTPUT_FORMATS):
        return f"{given} {path}: unknown format: name the file with one of {', '.join(OUTPUT_FORMATS)}"
    if probe:
        from factcli.report.writable import creation_problem

        if problem := creation_problem(path):
            return f"{given} {path}: {problem}"
    return None


def check(run, outputs: list[Path], filters: dict, output_key: str = "-o") -> None:
    """Raise PreflightFailed naming every problem found; return when there is none. `output_key` names
    where the outputs come from (`-o`, or the config's `outputPath`)."""
    from factcli.providers.registry import create_provider

    problems: list[str] = list(run.problems)  # the load's and the var check's
    suite = run.suite
    where = ", ".join(getattr(suite, "config_files", []) or []) or "the config"
    for i, spec in enumerate(suite.providers):
        if spec.label and spec.label.endswith("(not loaded)"):
            continue  # its problem is among the load's
        provider = create_provider(spec, suite.base_dir)
        problems.extend(f"{where}: providers[{i}] {spec.label or spec.id}: {p}" for p in provider.preflight())
    for spec, kind in run.grader_specs:
        if kind == "embedding":
            from factcli.providers.embedding import EmbeddingProvider

            provider = EmbeddingProvider(spec, suite.base_dir)
        else:
            provider = create_provider(spec, suite.base_dir)
        problems.extend(f"{where}: grader {spec.label or spec.id}: {p}" for p in provider.preflight())
    problems.extend(p for p in (output_problem(path, output_key) for path in outputs) if p)
    problems.extend(f"{where}: {p}" for p in _assertion_problems(suite))
    problems.extend(f"{where}: {p}" for p in _empty_prompts(suite))
    if run.total_steps == 0 and any(v is not None for v in filters.values()):
        given = " ".join(f"{k} {v}" for k, v in filters.items() if v is not None)
        from factcli.config.plan import tests_counted

        problems.append(f"{given}: no test is left to run (of {tests_counted(suite)})")
    if problems == suite.problems and getattr(suite, "problem_error", None) is not None:
        raise suite.problem_error  # the load's one problem, as the load would have raised it
    if problems:
        raise PreflightFailed(problems)


def _empty_prompts(suite) -> list[str]:
    """A prompt template that renders empty for every test (its vars are nowhere: a dataset's columns
    named otherwise, vars written beside `vars:`) would send empty prompts to paid models. Tests whose
    vars are made while the run goes (transformVars, extension hooks) or that call no model
    (providerOutput) are taken to fill it."""
    from factcli import templating

    from factcli.config.stream import facts_of

    tests = suite.tests
    facts = facts_of(tests)  # gathered while a suite from CSV/JSONL files loaded (config/stream.py)
    if facts is not None:
        if not tests or facts.no_model_call:
            return []
    elif suite.extensions or not tests or any(
            t.options.get("transformVars") or t.provider_output is not None or t.options.get("prefix")
            or t.options.get("suffix") for t in tests):
        return []
    problems = []
    for i, prompt in enumerate(suite.prompts):
        if prompt.function or prompt.message_functions or not templating.has_template(prompt.raw):
            continue
        try:
            if any(templating.render(prompt.raw, t.vars, []).strip() for t in tests):
                continue
        except Exception:  # noqa: BLE001 - a template that fails to render is reported per row, as before
            continue
        names = sorted(templating.referenced_names(prompt.raw) or ())
        hint = (f" (it uses {', '.join(names)}; no test has {'that var' if len(names) == 1 else 'those vars'})"
                if names and not any(n in t.vars for t in tests for n in names) else "")
        problems.append(f"prompts[{i}] {prompt.label!r} renders empty for every test{hint}")
    return problems


def _assertion_problems(suite) -> list[str]:
    """Each assertion type's own checks, once per distinct assertion; a problem several tests share is
    one line naming the first of them and how many more."""
    from factcli.scoring.registry import lookup

    found: dict[str, list[int]] = {}
    memo: dict[str, list[str]] = {}
    base = Path(suite.base_dir or ".")
    from factcli.config.stream import facts_of

    facts = facts_of(suite.tests)
    if facts is not None and not facts.preflighted:
        return []  # no assertion of a suite from CSV/JSONL files has a check of its own: not read again
    unchecked = None  # the last assertion list found without a check of its own (defaultTest's is shared)
    for i, test in enumerate(suite.tests):
        if test.assertions is unchecked:
            continue
        checked = [(a, kind) for a in walk(test.assertions)
                   if (kind := lookup(a.type)) is not None and kind.preflight is not None]
        if not checked:
            unchecked = test.assertions
            continue
        for a, kind in checked:
            key = (f"{kind.name}:{sorted((a.config or {}).items())!r}:{a.value!r}:{a.rubric_prompt is None}:"
                   f"{bool((test.options or {}).get('rubricPrompt'))}:{a.context_transform!r}")
            if getattr(kind.preflight, "per_test", False):  # its checks read the test's vars
                key += f":{i}"
            if key not in memo:  # a factscore knowledge source is loaded once, not per test
                memo[key] = kind.preflight(a, base, test)
            for problem in memo[key]:
                tests = found.setdefault(problem, [])
                if i not in tests:
                    tests.append(i)
    return [f"tests[{tests[0]}]{f' and {len(tests) - 1} more' if len(tests) > 1 else ''}: {problem}"
            for problem, tests in found.items()]


CONNECT_TIMEOUT_S = 5.0
_PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")


async def reach(breakers, providers: list, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Connect to each server of `providers` (Provider.server_url) once, all at the same time; open the
    breaker of every provider on a server that cannot be reached. A server reached through a proxy is left
    to the proxy (the connection would test the proxy, not the server)."""
    import asyncio
    from urllib.parse import urlparse

    servers: dict[tuple[str, int], list] = {}
    for provider in providers:
        url = provider.server_url()
        parsed = urlparse(url if url and "//" in url else f"http://{url}") if url else None
        host = parsed.hostname if parsed is not None else None
        if not host or (_proxied(host)):
            continue
        try:
            port = parsed.port or (443 if parsed.scheme == "https" else 80)
        except ValueError:
            continue  # a port that is not a number: the call reports it
        servers.setdefault((host, port), []).append(provider)
    if not servers:
        return
    problems = await asyncio.gather(*(_connect(host, port, timeout_s) for host, port in servers))
    for (host, port), problem in zip(servers, problems):
        if problem is not None:
            for provider in servers[(host, port)]:
                breakers.of(provider).open(f"could not connect to {host}:{port} before any call ({problem}); "
                                           "check that its server runs at that address")


async def _connect(host: str, port: int, timeout_s: float) -> str | None:
    import asyncio
    import socket

    try:
        async with asyncio.timeout(timeout_s):
            _, writer = await asyncio.open_connection(host, port)
    except ConnectionRefusedError:
        return "connection refused"
    except socket.gaierror:
        return "no such host"
    except TimeoutError:
        return f"no connection within {timeout_s:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return None


def _proxied(host: str) -> bool:
    from factcli.providers.pricing import is_local_url

    if is_local_url(f"http://{host}") or not any(os.environ.get(v) for v in _PROXY_VARS):
        return False
    skip = (os.environ.get("NO_PROXY") or os.environ.get("no_proxy") or "").split(",")
    return not any(s.strip() and host.endswith(s.strip().lstrip(".")) for s in skip)
