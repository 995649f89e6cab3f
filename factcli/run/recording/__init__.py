"""The run in the store: the session the flow holds (session.py) over its parts: where the run comes
from (source.py; what a resume takes from the store only when trusted, trust.py), what a resume keeps
(resume.py), the rows written in groups (writer.py; a store that goes away mid-run, outage.py), the run's
row and its final record (record.py), the gate verdicts recorded with it (gates.py), and a stored run
read back (stored.py)."""
