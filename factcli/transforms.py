"""Output transforms (`transform`, provider `transform`, `options.transform` / `postprocess`).

Python transforms are `file://x.py:fn` called in-process as fn(output, context). promptfoo's
JavaScript expressions need a Node worker, which factcli does not have yet: they are rejected
when the config loads, never silently skipped.
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

from factcli.errors import ConfigError


def check_transform(spec: Any, file: str, where: str, base_dir: Path) -> str | None:
    """Validate a transform at load time; returns it with an absolute path."""
    if spec is None:
        return None
    if not isinstance(spec, str):
        raise ConfigError("a transform must be a string", file, where)
    if spec.startswith("file://"):
        from factcli.sources import ref_path

        path, _ = ref_path(spec, base_dir)
        if path.suffix != ".py":
            raise ConfigError(f"only Python transforms (file://x.py:fn) are supported, got {spec!r}", file, where)
        if not path.is_file():
            raise ConfigError(f"transform file not found: {path}", file, where)
        return f"file://{path.resolve()}" + (f":{_}" if _ else "")
    raise ConfigError("JavaScript transform expressions are not supported yet; "
                      "use a Python function: transform: file://transforms.py:my_fn", file, where)


async def apply_transform(spec: str, output: Any, context: dict, base_dir: Path | None = None) -> Any:
    from factcli.providers.script import load_module
    from factcli.sources import ref_path

    path, func = ref_path(spec, base_dir or Path.cwd())
    fn = getattr(load_module(path), func or "transform")
    if inspect.iscoroutinefunction(fn):
        return await fn(output, context)
    return await asyncio.to_thread(fn, output, context)
