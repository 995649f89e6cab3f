"""The web view's token (web/auth.py): every request carries it once one is set (Bearer or the
sign-in cookie), the cookie is HttpOnly and SameSite and never the token itself, ratings record the
rater's name, and a write from another site is refused, token or not."""

import pytest
from conftest import write
from starlette.testclient import TestClient
from typer.testing import CliRunner

from factcli.cli import app
from factcli.web.app import create_app

TOKEN = "team-token-0123456789abcdef"
FORM = "form-token"


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    import os

    tmp = tmp_path_factory.mktemp("auth")
    db = tmp / "runs.db"
    cfg = write(tmp / "c.yaml", "prompts: ['Say {{w}}']\nproviders: [echo]\ntests:\n  - vars: {w: hi}\n")
    old = os.environ.get("FACTCLI_HOME")
    os.environ["FACTCLI_HOME"] = str(tmp / "home")
    try:
        result = CliRunner().invoke(app, ["eval", "-c", str(cfg), "--db", str(db), "--no-progress-bar", "--no-table"])
    finally:
        if old is not None:
            os.environ["FACTCLI_HOME"] = old
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture
def client(stored):
    with TestClient(create_app(stored, token=FORM, access_token=TOKEN), follow_redirects=False) as c:
        yield c


def test_without_the_token_nothing_is_served(client):
    page = client.get("/")
    assert page.status_code == 303 and page.headers["location"] == "/login?next=%2F"
    deep = client.get("/runs/latest?failures=1")
    assert deep.status_code == 303 and deep.headers["location"] == "/login?next=%2Fruns%2Flatest%3Ffailures%3D1"
    api = client.get("/api/runs/latest/status")
    assert api.status_code == 401 and api.headers["www-authenticate"] == "Bearer" and "Bearer" in api.json()["error"]
    for wrong in ("Bearer nope", f"Basic {TOKEN}", f"Bearer {TOKEN}x", ""):
        assert client.get("/", headers={"Authorization": wrong, "Accept": "application/json"}).status_code == 401
    posted = client.post("/api/runs/latest/ratings", json={"test_idx": 0, "prompt_idx": 0, "verdict": "pass",
                                                           "token": FORM})
    assert posted.status_code == 401
    assert client.get("/login").status_code == 200 and client.get("/static/web.css").status_code == 200


def test_bearer_token(client):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert client.get("/", headers=auth).status_code == 200
    status = client.get("/api/runs/latest/status", headers=auth).json()
    assert status["status"] == "complete"
    posted = client.post(f"/api/runs/{status['id']}/ratings", headers={**auth, "X-Factcli-Token": FORM},
                         json={"test_idx": 0, "prompt_idx": 0, "verdict": "pass", "rater": "ci-bot"})
    assert posted.status_code == 201 and posted.json()["rater"] == "ci-bot"


def test_sign_in_sets_an_httponly_samesite_cookie_and_names_the_rater(client):
    wrong = client.post("/login", data={"token": "nope", "next": "/runs/latest"})
    assert wrong.status_code == 401 and "wrong token" in wrong.text and "set-cookie" not in wrong.headers
    ok = client.post("/login", data={"token": TOKEN, "rater": "Ana B", "next": "/runs/latest"})
    assert ok.status_code == 303 and ok.headers["location"] == "/runs/latest"
    cookies = ok.headers.get_list("set-cookie")
    session = next(c for c in cookies if c.startswith("factcli_session_80="))  # named after the port
    assert "HttpOnly" in session and "samesite=lax" in session.lower() and TOKEN not in session
    assert all(TOKEN not in c for c in cookies)
    assert client.get("/").status_code == 200  # the cookie is enough now
    cell = client.get("/runs/latest/cell/0/0")
    assert cell.status_code == 200 and 'value="Ana B"' in cell.text
    run_id = client.get("/api/runs/latest/status").json()["id"]
    posted = client.post(f"/api/runs/{run_id}/ratings", data={"test_idx": "0", "prompt_idx": "0", "verdict": "fail",
                                                           "token": FORM, "next": "/"})
    assert posted.status_code == 303
    assert posted.headers["location"] == "/"
    assert "· Ana B ·" in " ".join(client.get("/runs/latest/cell/0/0").text.split())
    assert client.post("/login", data={"token": TOKEN, "next": "https://evil.example/"}).headers["location"] == "/"
    client.post("/logout")
    client.cookies.clear()
    assert client.get("/").status_code == 303


def test_cross_site_writes_are_refused_token_or_not(client, stored):
    auth = {"Authorization": f"Bearer {TOKEN}", "X-Factcli-Token": FORM}
    body = {"test_idx": 0, "prompt_idx": 0, "verdict": "pass"}
    run_id = client.get("/api/runs/latest/status", headers=auth).json()["id"]
    evil = client.post(f"/api/runs/{run_id}/ratings", headers={**auth, "Origin": "https://evil.example"}, json=body)
    assert evil.status_code == 403
    same = client.post(f"/api/runs/{run_id}/ratings", headers={**auth, "Origin": "http://testserver"}, json=body)
    assert same.status_code == 201
    login = client.post("/login", headers={"Origin": "https://evil.example"}, data={"token": TOKEN})
    assert login.status_code == 403
    with TestClient(create_app(stored, token=FORM), follow_redirects=False) as local:  # no access token
        assert local.get("/").status_code == 200
        assert local.post(f"/api/runs/{run_id}/ratings", headers={"Origin": "https://evil.example",
                                                               "X-Factcli-Token": FORM}, json=body).status_code == 403
