"""Running an eval: the session (a run's life in the store: open, resume, write rows, finish), the
runner (prepare, execute, the EvalRun), the executor (one step: render, call, score), the one owner
of retries and per-endpoint limits (calls.py, limits.py) and of the response cache (cache.py), a
stored run read back, and calibrate."""
