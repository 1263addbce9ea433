"""A client's error messages are masked before they are cut to length: a cut inside a URL's password or an API
key must not leave the secret's first characters behind (each message is sized so the cut falls inside it)."""

from __future__ import annotations

import httpx
import pytest

from pytest_specperf.endpoint.client import Client
from pytest_specperf.errors import MeasurementError

PASSWORD = "Secret1234Pw"
KEY = "KeyABCDEF123456"


def _shown(error: MeasurementError) -> str:
    text = str(error)
    for secret in (PASSWORD, KEY):  # neither the secret nor its first four characters
        assert secret[:4] not in text, text
    return text


@pytest.fixture
def client() -> Client:
    return Client("http://127.0.0.1:1", api_key=KEY)


def test_a_cut_stream_names_a_proxy_url_masked(client: Client) -> None:
    # 58 + " via " + "http://u:" = 72 characters: the 80-character cut (77 and "...") falls inside the password
    text = _shown(client.cut(5, OSError("x" * 58 + f" via http://u:{PASSWORD}@proxy:3128 refused")))
    assert "http://u:***@" in text, text


def test_a_refused_connection_names_its_url_masked(client: Client) -> None:
    # 43 + " " + "http://u:" = 53: the 60-character cut falls inside the password
    with pytest.raises(MeasurementError) as caught, client.named_errors("GET", "/v1/models"):
        raise httpx.ConnectError("z" * 43 + f" http://u:{PASSWORD}@h:1 refused")
    assert "http://u:***@" in _shown(caught.value)


def test_a_server_message_echoing_the_api_key_is_masked(client: Client) -> None:
    # 85 + " key " = 90: the 100-character cut falls inside the key
    resp = httpx.Response(401, json={"error": {"message": "y" * 85 + f" key {KEY} is not valid"}})
    with pytest.raises(MeasurementError) as caught:
        client.check_status(resp, "GET /v1/models")
    assert "key ***" in _shown(caught.value)


def test_a_connection_closed_mid_answer_names_its_url_masked(client: Client) -> None:
    with pytest.raises(MeasurementError) as caught, client.named_errors("POST", "/v1/completions"):
        raise httpx.RemoteProtocolError("z" * 43 + f" http://u:{PASSWORD}@h:1 closed")
    assert "without a complete answer" in str(caught.value) and "http://u:***@" in _shown(caught.value)
