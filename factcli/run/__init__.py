"""Running an eval: the flow (flow.py) and the Python API (api.py, check.py, result.py), the typed
options (options.py), the runner (prepare, execute, the EvalRun), the executor (one step: its row, its
call, its scoring), extension hooks, and calibrate. By job, below them: recording/ (the run in the
store: open or resume, write rows, finish), planning/ (what the run will do, before any call) and
calling/ (the one owner of a call: retries, limits, breaker, budget, caches)."""
