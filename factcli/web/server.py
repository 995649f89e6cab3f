"""`factcli view --web`: serve the web view under uvicorn until Ctrl-C.

Binds 127.0.0.1 by default. The default port is 15510 (documented in docs/web.md); when it is taken
and no --port was given, a free port is used instead. The browser opens on the run page (or the runs
list) unless --no-open."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from pathlib import Path

DEFAULT_PORT = 15510
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def pick_port(host: str, port: int | None) -> tuple[int, str | None]:
    """(port, a note) — an explicit port that is taken is an error (FactcliError); the default
    port, when taken, gives way to a free one with a note saying so."""
    from factcli.errors import FactcliError

    if port is not None:
        if not port_free(host, port):
            raise FactcliError(f"--port {port}: the port is in use on {host} (pick another, or leave out --port)")
        return port, None
    if port_free(host, DEFAULT_PORT):
        return DEFAULT_PORT, None
    chosen = free_port(host)
    return chosen, f"port {DEFAULT_PORT} is in use; serving on {chosen} instead"


def url_of(host: str, port: int, path: str = "/") -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else ("[::1]" if host == "::1" else host)
    return f"http://{shown}:{port}{path}"


MIN_TOKEN_CHARS = 16


def check_token(host: str, token: str | None) -> str | None:
    """The access token a server on `host` uses: required on an address other than loopback
    (FactcliError without one), at least MIN_TOKEN_CHARS long; None on loopback without one."""
    from factcli.errors import FactcliError

    token = (token or "").strip() or None
    if token is None:
        if host in LOCAL_HOSTS:
            return None
        raise FactcliError(f"--host {host} serves every stored run to the network: give a token with --token TOKEN "
                           "or FACTCLI_WEB_TOKEN (every request must then carry it), or use --host 127.0.0.1")
    if len(token) < MIN_TOKEN_CHARS:
        raise FactcliError(f"the web token is too short ({len(token)} characters): use at least {MIN_TOKEN_CHARS} "
                           "(python -c 'import secrets; print(secrets.token_urlsafe(24))' makes one)")
    return token


def exposed_warning(host: str, token: str | None = None) -> str | None:
    if host in LOCAL_HOSTS:
        return None
    return (f"warning: --host {host}: anyone who can reach this machine and has the token can read every stored "
            "run (outputs, prompts, vars) and add ratings; the server speaks plain HTTP, so put it behind an "
            "HTTPS proxy or a VPN when the network is not trusted")


def serve(db: Path | str, *, host: str, port: int, path: str = "/", open_browser: bool = True,
          echo: Callable[[str], None] = print, token: str | None = None, allowed: tuple | list = ()) -> None:
    """Run the server in this thread until Ctrl-C; open the browser on `path` once it listens.
    `token`: every request must carry it (web/auth.py). `allowed`: Host names answered besides the
    loopback names and `host` (web/guard.py: a name a proxy or the network uses for this machine)."""
    import uvicorn

    from factcli.store.database import shown
    from factcli.web.app import create_app
    from factcli.web.guard import allowed_hosts

    app = create_app(db, access_token=token, hosts=allowed_hosts(host, allowed))
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            lifespan="off", server_header=False)
    server = uvicorn.Server(config)
    url = url_of(host, port, path)
    if open_browser:
        def opener() -> None:
            import time
            import webbrowser

            for _ in range(100):  # wait until it listens (at most 10 s)
                if server.started:
                    break
                time.sleep(0.1)
            with contextlib.suppress(webbrowser.Error, OSError):  # no browser here: the printed URL will do
                webbrowser.open(url)

        threading.Thread(target=opener, daemon=True).start()
    echo(f"Serving {shown(db)} at {url}  (Ctrl-C stops" + ("; requests need the token)" if token else ")"))
    server.run()  # uvicorn handles SIGINT/SIGTERM: it stops accepting, finishes requests, returns
    echo("Stopped.")
