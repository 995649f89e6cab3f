"""The run store on each backend: rows written per second (10,000 `echo` rows, three assertions each,
through `factcli eval`, and the bulk write path alone), and `factcli view`'s first screen of a
100,000-row run. PostgreSQL is a throw-away cluster on 127.0.0.1 (tests/pg_cluster.py; fsync off,
as on a test machine: a real server with fsync pays its commit latency once per batch of rows).

    python benchmarks/team_store.py --n 10000 --repeats 3
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, echo_config, factcli, machine, median, spread, warm_home  # noqa: E402

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from pg_cluster import PgCluster  # noqa: E402
from test_view import make_big_run  # noqa: E402  (the same stored run as benchmarks/view.py)


def bulk_rate(target, n: int) -> float:
    """Rows per second through Store.write_results alone, in the session's groups of 500, committed each."""
    from factcli.store.database import RESULT_FIELDS, Store

    rows = [tuple({"run_id": "eval-bench", "test_idx": i, "prompt_idx": 0, "repeat_idx": 0, "seq": i,
                   "output": "Answer: question %d" % i, "success": 1, "failure_reason": 0, "score": 1.0,
                   "grading_json": '{"pass": true, "score": 1.0, "reason": "All assertions passed"}',
                   "vars_json": '{"q": "question %d"}' % i, "extra_json": "{}"}.get(f) for f in RESULT_FIELDS)
            for i in range(n)]
    with Store.open(target, create=True) as store:
        store.insert_run({"id": "eval-bench", "created_at": "2099-01-01T00:00:00", "status": "complete"})
        start = time.perf_counter()
        for i in range(0, n, 500):
            store.write_results(rows[i:i + 500])
            store.commit()
        return n / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    cluster = PgCluster()
    reason = cluster.start()
    if reason:
        sys.exit(f"cannot start PostgreSQL: {reason}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            home = warm_home(tmp / "home")
            cfg = echo_config(tmp / "echo.yaml", args.n)
            stores = {"SQLite": lambda i: tmp / f"w{i}.db", "PostgreSQL": lambda i: cluster.new_database()}
            print(machine())
            print(f"\n{args.n:,} echo rows through `factcli eval` (whole command), medians of {args.repeats}")
            print("| store | wall s | min-max | CPU s | rows/s |")
            print("|---|---|---|---|---|")
            for name, target in stores.items():
                walls, cpus = [], []
                for i in range(args.repeats):
                    db = target(i)
                    factcli(["eval", "-c", cfg, "--db", db, "--no-table",
                             "--no-progress-bar", "--filter-first-n", "1"], home)  # the schema exists
                    m = factcli(["eval", "-c", cfg, "--db", db, "--no-table", "--no-progress-bar"], home)
                    assert m.returncode == 0, m.stderr[-800:]
                    walls.append(m.wall)
                    cpus.append(m.cpu)
                print(f"| {name} | {median(walls):.2f} | {spread(walls)} | {median(cpus):.2f} | "
                      f"{args.n / median(walls):,.0f} |")
            print(f"\nStore.write_results alone ({args.n:,} rows in groups of 500), medians of {args.repeats}")
            print("| store | rows/s |")
            print("|---|---|")
            for name, target in stores.items():
                rates = [bulk_rate(target(100 + i), args.n) for i in range(args.repeats)]
                print(f"| {name} | {median(rates):,.0f} |")

            big = tmp / "big.db"
            make_big_run(big, tests=25_000, columns=4)
            url = cluster.new_database()
            start = time.perf_counter()
            m = factcli(["copy", "latest", "--db", big, "--to", url], home)
            assert m.returncode == 0, m.stderr[-800:]
            print(f"\n`factcli copy` of the 100,000-row run SQLite -> PostgreSQL: {time.perf_counter() - start:.1f} s")
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:  # what autovacuum does within a minute
                conn.execute("VACUUM ANALYZE results")
            print(f"\n`factcli view` of the 100,000-row run, first screen, medians of {args.repeats}")
            print("| store | case | wall s | min-max | CPU s |")
            print("|---|---|---|---|---|")
            for name, db in (("SQLite", big), ("PostgreSQL", url)):
                for case, extra in (("first page", []), ("--failures", ["--failures"]),
                                    ("--filter (last test)", ["--filter", "question 24999"])):
                    factcli(["view", "--db", db, *extra], home)  # warm
                    walls, cpus = [], []
                    for _ in range(args.repeats):
                        m = factcli(["view", "--db", db, *extra], home)
                        assert m.returncode == 0 and "Rows: 100000/100000" in m.stdout, m.stdout[-800:]
                        walls.append(m.wall)
                        cpus.append(m.cpu)
                    print(f"| {name} | {case} | {median(walls):.2f} | {spread(walls)} | {median(cpus):.2f} |")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
