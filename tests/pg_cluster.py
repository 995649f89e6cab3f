"""A throw-away PostgreSQL cluster for the tests and the benchmarks: initdb into a temp dir, start on a
free port on 127.0.0.1 with password authentication, a fresh database per test, stopped at the end.

As root (CI) the server runs as the `postgres` user, which initdb requires. `PgCluster.start()`
returns None when it is up, else why it cannot be started (the tests then skip, saying so).
"""

from __future__ import annotations

import glob
import itertools
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "factcli_test"


def _binary(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return found[0] if found else shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgCluster:
    def __init__(self) -> None:
        self.dir: Path | None = None
        self.port = 0
        self.password = "pw-" + secrets.token_hex(12)  # tests look for it in every stored byte
        self._names = itertools.count(1)
        self._as: list[str] = []
        self.started = False
        self._opts = ""

    def _run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([*self._as, *cmd], capture_output=True, text=True, timeout=120, check=check)

    def start(self) -> str | None:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            return "psycopg is not installed (pip install 'factcli[postgres]')"
        initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
        if not (initdb and pg_ctl):
            return "PostgreSQL's initdb/pg_ctl are not installed (Debian: apt-get install postgresql)"
        self.dir = Path(tempfile.mkdtemp(prefix="factcli-pg-"))
        if os.geteuid() == 0:  # initdb refuses to run as root
            try:
                import pwd

                pw = pwd.getpwnam("postgres")
            except KeyError:
                return "running as root and there is no `postgres` user to run the server as"
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            runuser = shutil.which("runuser")
            self._as = [runuser, "-u", "postgres", "--"] if runuser else ["su", "postgres", "-s", "/bin/sh", "-c"]
            if not runuser:
                return "running as root without `runuser` to start the server as postgres"
        pwfile = self.dir / "pw"
        pwfile.write_text(self.password + "\n")
        if self._as:
            os.chown(pwfile, pw.pw_uid, pw.pw_gid)
        data = self.dir / "data"
        try:
            self._run(initdb, "-D", str(data), "-U", USER, f"--pwfile={pwfile}", "--auth-host=scram-sha-256",
                      "--auth-local=trust", "-E", "UTF8", "--locale=C")
            pwfile.unlink()
            self.port = _free_port()
            opts = f"-k {self.dir} -h 127.0.0.1 -p {self.port} -F -c max_connections=200 -c shared_buffers=32MB"
            self._opts = opts
            self._run(pg_ctl, "-D", str(data), "-o", opts, "-l", str(self.dir / "log"), "-w", "-t", "60", "start")
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            return f"could not start a PostgreSQL cluster: {' '.join(str(detail).split())[:300]}"
        self.started = True
        return None

    def url(self, database: str = "postgres", password: bool = True) -> str:
        auth = f"{USER}:{self.password}" if password else USER
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def pg_dump(self, url: str) -> bytes:
        dump = _binary("pg_dump")
        env = {**os.environ, "PGPASSWORD": self.password}
        return subprocess.run([dump, "--no-owner", url.replace(f":{self.password}@", "@")], capture_output=True,
                              env=env, timeout=120, check=True).stdout

    def halt(self) -> None:
        """Stop the server at once (`pg_ctl stop -m immediate`: connections cut, as a crash would)."""
        self._run(_binary("pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop")

    def restart(self) -> None:
        """Start the halted server again, on the same port (it recovers from its log first)."""
        self._run(_binary("pg_ctl"), "-D", str(self.dir / "data"), "-o", self._opts, "-l", str(self.dir / "log"),
                  "-w", "-t", "60", "start")

    def stop(self) -> None:
        if self.dir is None:
            return
        if self.started:
            self._run(_binary("pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
