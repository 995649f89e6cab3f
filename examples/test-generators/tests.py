"""The example's test generator: one test per row of the CSV the config passes in as `config.rows`.

factcli calls `generate` once, when the config loads (before any model call), and checks what it
returns like any list of tests. Without a `config:` (`tests: file://tests.py:generate`) it is called
with no arguments, hence the default.
"""

DEFAULT_ROWS = [{"country": "Australia", "capital": "Canberra", "misconception": "Sydney"}]


def generate(config=None):
    rows = (config or {}).get("rows") or DEFAULT_ROWS
    tests = []
    for row in rows:
        asserts = [{"type": "icontains", "value": row["capital"], "metric": "correct"}]
        if row.get("misconception"):
            asserts.append({"type": "not-icontains", "value": row["misconception"], "metric": "avoids_myth"})
        tests.append({"description": f"capital of {row['country']}", "vars": {"country": row["country"]},
                      "assert": asserts})
    return tests
