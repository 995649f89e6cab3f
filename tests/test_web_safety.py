"""The web view on a network (issue 39, web/guard.py, web/auth.py, web/app.py): only the Host names it
was started for, no framing, request bodies limited while read (an 800 MB POST to a real server
process leaves it under 100 MB), error pages that give nothing away to a client not signed in,
sessions that expire, rotate and end, 400 for malformed input and 503 for a store that is down."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import test_web_auth
from starlette.testclient import TestClient

from factcli.settings import VERSION
from factcli.web import auth
from factcli.web.app import create_app
from factcli.web.guard import allowed_hosts

stored = test_web_auth.stored  # a stored run of one row: the fixture the sign-in tests use
TOKEN = "team-token-0123456789abcdef"
FORM = "form-token-abc"


def _client(stored, host="127.0.0.1", extra=(), access_token=None, base="http://127.0.0.1:15510"):
    return TestClient(create_app(stored, token=FORM, access_token=access_token, hosts=allowed_hosts(host, extra)),
                      base_url=base, follow_redirects=False)


# ---------------------------------------------------------------- Host names


def test_only_the_host_names_it_was_started_for_are_answered(stored):
    with _client(stored) as c:
        assert c.get("/").status_code == 200
        for name in ("localhost:15510", "[::1]:15510", "127.0.0.1"):
            assert c.get("/", headers={"Host": name}).status_code == 200, name
        rebound = c.get("/", headers={"Host": "rebind.attacker.example:15510"})
        assert rebound.status_code == 400 and FORM not in rebound.text and "runs.db" not in rebound.text
        run_id = c.get("/api/runs/latest/status").json()["id"]
        posted = c.post(f"/api/runs/{run_id}/ratings", headers={"Host": "rebind.attacker.example:15510",
                                                                "X-Factcli-Token": FORM},
                        json={"test_idx": 0, "prompt_idx": 0, "verdict": "fail"})
        assert posted.status_code == 400
        assert c.get(f"/runs/{run_id}/cell/0/0").text.count("rating-item") == 0  # nothing was stored
    assert allowed_hosts("0.0.0.0", ["evals.example.com"], machine=("ci-7", "ci-7.corp")) == [
        "127.0.0.1", "localhost", "[::1]", "ci-7", "ci-7.corp", "evals.example.com"]
    assert socket.gethostname().lower() in allowed_hosts("0.0.0.0")
    assert allowed_hosts("10.0.0.7") == ["127.0.0.1", "localhost", "[::1]", "10.0.0.7"]
    assert allowed_hosts("fe80::1") == ["127.0.0.1", "localhost", "[::1]", "[fe80::1]"]
    with _client(stored, "0.0.0.0", ["evals.example.com"], access_token=TOKEN) as c:
        assert c.get("/login", headers={"Host": "evals.example.com"}).status_code == 200
        assert c.get("/login", headers={"Host": "other.example.com"}).status_code == 400


# ---------------------------------------------------------------- framing


def test_every_response_forbids_framing(stored):
    with _client(stored, access_token=TOKEN) as c:
        for response in (c.get("/login"), c.get("/static/web.css"), c.get("/"), c.get("/static/nope"),
                         c.get("/", headers={"Host": "evil.example"}),
                         c.post("/login", content=b"x" * 20_000)):
            csp = response.headers.get("content-security-policy", "")
            assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp, response
            assert response.headers.get("x-frame-options") == "DENY"
            assert response.headers.get("x-content-type-options") == "nosniff"


# ---------------------------------------------------------------- bodies


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _post_800mb(port: int, chunked: bool) -> bytes:
    """Send an 800 MB sign-in form (declared, or chunked) as fast as the server takes it; its answer."""
    total, chunk = 800 * 1024 * 1024, b"t" * (1024 * 1024)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        head = "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else f"Content-Length: {total}\r\n\r\n"
        s.sendall(head.encode())
        sent = 0
        try:
            while sent < total:
                s.sendall(b"100000\r\n" + chunk + b"\r\n" if chunked else chunk)
                sent += len(chunk)
        except OSError:  # the server answered and closed: the rest is never read
            pass
        try:
            return s.recv(4096)
        except OSError:
            return b""


def test_an_800_mb_post_to_login_leaves_the_server_under_100_mb(stored, tmp_path):
    port = _free_port()
    env = {**os.environ, "FACTCLI_WEB_TOKEN": TOKEN, "FACTCLI_HOME": str(tmp_path / "home")}
    server = subprocess.Popen([sys.executable, "-m", "factcli", "view", "--web", "--no-open", "--port", str(port),
                               "--db", str(stored)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        before = _peak_mb(server.pid)
        for chunked in (False, True):
            answer = _post_800mb(port, chunked)
            assert answer.startswith(b"HTTP/1.1 413"), (chunked, answer[:200])
        peak = _peak_mb(server.pid)
        print(f"server peak RSS: {before:.0f} MB before, {peak:.0f} MB after two 800 MB posts")
        assert peak < 100, (before, peak)
        assert server.poll() is None  # still serving
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /login HTTP/1.1\r\nHost: rebind.attacker.example\r\nConnection: close\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 400")
    finally:
        server.terminate()
        server.wait(timeout=30)


# ---------------------------------------------------------------- error pages


def test_error_pages_give_nothing_away_before_sign_in(stored):
    with _client(stored, access_token=TOKEN) as c:
        for response in (c.get("/static/nope.css"), c.get("/static/nope.css", headers={"Accept": "text/html"})):
            assert response.status_code == 404
            for secret in (FORM, TOKEN, str(stored), VERSION, "factcli-token"):
                assert secret not in response.text, secret
        c.post("/login", data={"token": TOKEN})
        missing = c.get("/runs/no-such-run")
        assert missing.status_code == 404 and FORM not in missing.text and VERSION not in missing.text


# ---------------------------------------------------------------- sessions


def _session(response, port=15510):
    return next(c for c in response.headers.get_list("set-cookie") if c.startswith(f"factcli_session_{port}="))


def _get_with_session(c, value, port=15510):
    """GET / carrying this session cookie alone: per-request cookies are merged with the client's jar
    (httpx2, which starlette's TestClient uses once installed, sends both), so the header is set by hand."""
    request = c.build_request("GET", "/")
    request.headers["cookie"] = f"factcli_session_{port}={value}"
    return c.send(request)


def test_sessions_expire_rotate_end_at_sign_out_and_are_named_per_port(stored, monkeypatch):
    with _client(stored, access_token=TOKEN) as c:
        first = c.post("/login", data={"token": TOKEN})
        cookie = _session(first)
        assert f"Max-Age={auth.SESSION_TTL_S}" in cookie and TOKEN not in cookie
        old = c.cookies.get("factcli_session_15510")
        assert c.get("/").status_code == 200
        second = c.post("/login", data={"token": TOKEN})  # a new session at each sign-in
        new = c.cookies.get("factcli_session_15510")
        assert new != old and _session(second)
        assert _get_with_session(c, old).status_code == 303  # the planted one is dead
        assert c.get("/").status_code == 200
        c.post("/logout")
        assert _get_with_session(c, new).status_code == 303  # ended, not just forgotten
        c.post("/login", data={"token": TOKEN})
        assert c.get("/").status_code == 200
        later = time.monotonic() + auth.SESSION_TTL_S + 1
        monkeypatch.setattr(auth.time, "monotonic", lambda: later)
        assert c.get("/").status_code == 303  # expired
    with _client(stored, access_token=TOKEN, base="http://127.0.0.1:16001") as other:
        assert _session(other.post("/login", data={"token": TOKEN}), 16001)


# ---------------------------------------------------------------- malformed input, a store that is down


def test_malformed_input_is_a_400(stored):
    with _client(stored) as c:
        run_id = c.get("/api/runs/latest/status").json()["id"]
        url = f"/api/runs/{run_id}/ratings"
        h = {"X-Factcli-Token": FORM}
        for body in ({"test_idx": 10**30, "prompt_idx": 0, "verdict": "pass"},
                     {"test_idx": 0.9, "prompt_idx": 0, "verdict": "pass"},
                     {"test_idx": True, "prompt_idx": 0, "verdict": "pass"},
                     {"test_idx": "1e3", "prompt_idx": 0, "verdict": "pass"},
                     {"test_idx": 0, "prompt_idx": 0, "verdict": "pass", "comment": "a\x00b"}):
            r = c.post(url, headers=h, json=body)
            assert r.status_code == 400 and "error" in r.json(), (body, r.text)
        deep = c.post(url, headers={**h, "Content-Type": "application/json"}, content=b"[" * 30_000 + b"]" * 30_000)
        assert deep.status_code == 400
        for path in (f"/runs/{run_id}?metric=acc%00x", f"/runs/{run_id}?page=1000000000000",
                     f"/runs/{run_id}?limit=99999999999999999999", f"/runs/{run_id}/cell/99999999999999999999/0",
                     f"/runs/{run_id}?q=%00"):
            assert c.get(path).status_code == 400, path
        ok = c.post(url, headers=h, json={"test_idx": "0", "prompt_idx": 0, "verdict": "pass"})
        assert ok.status_code == 201 and ok.json()["testIdx"] == 0


def test_a_store_that_is_down_is_a_503(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    url = f"postgresql://ann:pw-s3cret@127.0.0.1:{port}/evals"
    with TestClient(create_app(url, token=FORM, hosts=allowed_hosts("127.0.0.1")),
                    base_url="http://127.0.0.1:15510", follow_redirects=False) as c:
        for response in (c.get("/"), c.get("/runs/latest"), c.get("/api/runs/latest/status"),
                         c.post("/api/runs/x/ratings", headers={"X-Factcli-Token": FORM},
                                json={"test_idx": 0, "prompt_idx": 0, "verdict": "pass"})):
            assert response.status_code == 503, (response.request.url, response.text)
            assert "pw-s3cret" not in response.text


def test_a_lone_surrogate_and_an_id_past_the_stores_integers_are_400s_not_500s(stored):
    """Issue 48: JSON's `"\\ud800"` in a comment or a rater, and a rating id of 2^63, reached the store and
    gave 500s."""
    with _client(stored) as c:
        run_id = c.get("/api/runs/latest/status").json()["id"]
        url = f"/api/runs/{run_id}/ratings"
        h = {"X-Factcli-Token": FORM, "Content-Type": "application/json"}
        for field in ("comment", "rater"):
            body = ('{"test_idx": 0, "prompt_idx": 0, "verdict": "pass", "%s": "bad \\ud800 text"}' % field).encode()
            r = c.post(url, headers=h, content=body)
            assert r.status_code == 400 and "lone surrogate" in r.json()["error"], r.text
        form = c.post(url, headers={"X-Factcli-Token": FORM, "Content-Type": "application/x-www-form-urlencoded"},
                      content=b"test_idx=0&prompt_idx=0&verdict=pass&comment=%ED%A0%80")
        assert form.status_code == 303, form.text  # a form's bytes that are not UTF-8 are read as U+FFFD
        for rid in (2**63, 2**64, 10**30):
            r = c.post(f"/api/ratings/{rid}/retract", headers=h, content=b"{}")
            assert r.status_code == 400 and "rating id" in r.json()["error"], (rid, r.text)
        assert c.post(f"/api/ratings/{2**63 - 1}/retract", headers=h, content=b"{}").status_code == 404
        ok = c.post(url, headers=h, content='{"test_idx": 0, "prompt_idx": 0, "verdict": "pass", "comment": "ok é"}'.encode())
        assert ok.status_code == 201 and ok.json()["comment"] == "ok é"
