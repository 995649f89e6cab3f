"""The one owner of a call (caller.Caller) and its machinery: the response and download cache, the
per-endpoint limits, the circuit breaker, the budget and the clock they wait by. Imports nothing
else of factcli.run (pyproject.toml's contract)."""
