"""The run in the store: the session (open or resume a stored run, write its rows, finish it), a
store that goes away mid-run (outage), a stored run read back, what a resume trusts, and the
gate verdicts recorded with the run."""
