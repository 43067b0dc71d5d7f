"""The mock's control surface is closed by default: a random admin token, no browser Origin,
no foreign Host, on every route; the token never reaches the journal.

Each refusal is shown next to the same request accepted (so the assertions can fail).
Traffic goes to loopback only.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import anthropic
import httpx
import pytest

from mockapi import Rule, Scenario, text
from mockapi.serve.admin import ADMIN_TOKEN_HEADER
from mockapi.serve.server import MockServer

SCENARIO = Scenario(classifier="plain", rules=[Rule(reply=text("SCRIPTED"), repeat="always")])
API_HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01",
               "content-type": "application/json"}
BODY = json.dumps({"model": "m", "max_tokens": 5,
                   "messages": [{"role": "user", "content": "hi"}]})
EVIL = json.dumps({"scenario": {"rules": [{"reply": {"text": "EVIL"}}]}})


@pytest.fixture
def mock(tmp_path: Path):  # type: ignore[no-untyped-def]
    with MockServer(SCENARIO, tmp_path / "j.jsonl") as server:
        yield server


def test_admin_needs_the_random_token(mock: MockServer) -> None:
    assert mock.admin_token and len(mock.admin_token) >= 24
    assert httpx.get(f"{mock.url}/_mock/state", timeout=10).status_code == 403
    assert mock.admin("GET", "state").status_code == 200
    other = MockServer(SCENARIO, mock.journal.path.with_name("k.jsonl"))
    assert other.admin_token != mock.admin_token
    other.stop()


def test_a_web_page_cannot_script_the_mock(mock: MockServer) -> None:
    """A page posting text/plain (no CORS preflight) to the loopback port is refused, even
    with the token (a page could have learnt it), and installs nothing."""
    for headers in ({"content-type": "text/plain"},
                    {"content-type": "text/plain", ADMIN_TOKEN_HEADER: mock.admin_token or ""}):
        refused = httpx.post(f"{mock.url}/_mock/scenario", content=EVIL, timeout=10,
                             headers={**headers, "origin": "https://evil.example"})
        assert refused.status_code == 403
        assert "Origin" in refused.json()["error"]["message"]
    api = httpx.post(f"{mock.url}/v1/messages", content=BODY, timeout=10,
                     headers={**API_HEADERS, "origin": "https://evil.example"})
    assert api.status_code == 403 and api.json()["error"]["type"] == "permission_error"
    answered = httpx.post(f"{mock.url}/v1/messages", content=BODY, headers=API_HEADERS,
                          timeout=10)
    assert answered.json()["content"][0]["text"] == "SCRIPTED"  # nothing was installed
    requests = [r for r in mock.read().requests()]
    assert [r["outcome"] for r in requests] == ["refused", "replied"]
    assert requests[0]["status"] == 403 and "body" not in requests[0]


def test_a_foreign_host_is_refused_on_every_route(mock: MockServer) -> None:
    """DNS rebinding: a name the attacker controls resolving to 127.0.0.1."""
    rebound = {"host": "rebind.attacker.example"}
    for method, path, headers in (("POST", "/v1/messages", API_HEADERS),
                                  ("GET", "/_mock/state", {ADMIN_TOKEN_HEADER:
                                                           mock.admin_token or ""}),
                                  ("GET", "/v1/models", API_HEADERS)):
        refused = httpx.request(method, f"{mock.url}{path}", timeout=10,
                                headers={**headers, **rebound},
                                content=BODY if method == "POST" else None)
        assert refused.status_code == 403, path
        assert "expected Host" in refused.json()["error"]["message"]
    port = mock.url.rsplit(":", 1)[1]
    by_name = httpx.post(f"http://localhost:{port}/v1/messages", content=BODY,
                         headers=API_HEADERS, timeout=10)
    assert by_name.status_code == 200


def test_the_admin_token_is_never_journaled(mock: MockServer) -> None:
    token = mock.admin_token or ""
    httpx.post(f"{mock.url}/v1/messages", content=BODY, timeout=10,
               headers={**API_HEADERS, ADMIN_TOKEN_HEADER: token})
    assert token not in mock.journal.path.read_text()
    assert mock.read().requests()[0]["headers"][ADMIN_TOKEN_HEADER] == "[redacted]"


def _sdk_uses_httpx2() -> bool:
    try:
        anthropic.Anthropic(api_key="k", http_client=httpx.Client())
    except TypeError:
        return True
    return False


def test_the_official_sdk_through_a_unix_socket(tmp_path: Path) -> None:
    socket = tmp_path / "m.sock"
    with MockServer(SCENARIO, tmp_path / "j.jsonl", uds=socket,
                    public_url="http://127.0.0.1:8080") as mock:
        assert oct(socket.stat().st_mode & 0o777) == "0o600"
        # newer SDKs ship their own fork of httpx
        transport = importlib.import_module("httpx2" if _sdk_uses_httpx2() else "httpx")
        client = anthropic.Anthropic(
            base_url=mock.url, api_key="k",
            http_client=transport.Client(transport=transport.HTTPTransport(uds=str(socket))))
        reply = client.messages.create(model="m", max_tokens=5,
                                       messages=[{"role": "user", "content": "hi"}])
        assert reply.content[0].text == "SCRIPTED"  # type: ignore[union-attr]
        assert mock.admin("GET", "state").status_code == 200
        assert mock.read().requests()[0]["headers"]["host"] == "127.0.0.1:8080"
    assert not socket.exists()


def test_serve_prints_a_token_and_refuses_tokenless_admin(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "mockapi", "--journal", str(tmp_path / "j.jsonl")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = process.stdout.readline().split("listening on ", 1)[1].split()[0]  # type: ignore[union-attr]
        token = process.stdout.readline().split("admin token: ", 1)[1].split()[0]  # type: ignore[union-attr]
        assert httpx.get(f"{url}/_mock/state", timeout=10).status_code == 403
        assert httpx.get(f"{url}/_mock/state", timeout=10,
                         headers={ADMIN_TOKEN_HEADER: token}).status_code == 200
    finally:
        process.terminate()
        process.wait(10)


def test_serve_admin_open_warns(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "mockapi", "--admin-open", "--journal",
         str(tmp_path / "j.jsonl")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = process.stdout.readline().split("listening on ", 1)[1].split()[0]  # type: ignore[union-attr]
        assert "WARNING" in process.stderr.readline()  # type: ignore[union-attr]
        assert httpx.get(f"{url}/_mock/state", timeout=10).status_code == 200
    finally:
        process.terminate()
        process.wait(10)
