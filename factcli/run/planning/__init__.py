"""What a run will do, settled before any call: its steps (steps.py), each row's vars and prompt
(row_vars.py: planned with the run, built as each row starts), the rows that wait for others
(conversations.py), which models grade it (graders.py), the checks before any call (preflight.py) and
the dry run's estimate (estimate.py). Of factcli.run it imports calling/ alone (pyproject.toml's
contract)."""
