"""What run/calling/batches.py asks of a vendor's batch API, whichever vendor: submit lines, read a batch's
state and counts, read its results, cancel it. Each vendor's client (providers/batch_openai.py,
providers/batch_anthropic.py) speaks its own API through the vendor's SDK and answers in these terms.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

# a batch's state, the same words for every vendor
RUNNING, ENDED = "running", "ended"


class BatchState(NamedTuple):
    state: str  # RUNNING, or ENDED (its results can be read: completed, failed, expired, cancelled alike)
    status: str  # the vendor's own word (OpenAI's `status`, Anthropic's `processing_status`)
    total: int
    done: int  # lines answered
    failed: int  # lines that failed (errored, expired, cancelled)
    error: str | None = None  # why the whole batch failed (a line that failed validation), if it did


class LineResult(NamedTuple):
    body: dict | None  # the vendor's reply to the line, as its direct call returns it
    error: str | None  # why the line has no reply
    retry: bool = True  # False: asking again would fail the same way (a 400)


class BatchClient(Protocol):
    kind: str  # "openai" | "anthropic", stored with the run's batches
    max_lines: int  # the vendor's limits of one batch
    max_bytes: int

    async def submit(self, lines: list[tuple[str, dict]], tag: str = "") -> str:
        """(custom_id, request body) lines -> the vendor's batch id; `tag` marks the batch where the
        vendor keeps metadata, for `find`."""

    # optional: async def find(self, tag: str) -> str | None: the batch submitted with `tag`, if any

    async def status(self, batch_id: str) -> BatchState: ...

    async def results(self, batch_id: str) -> dict[str, LineResult]: ...

    async def cancel(self, batch_id: str) -> None: ...

    async def aclose(self) -> None: ...
