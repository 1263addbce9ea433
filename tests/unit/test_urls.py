"""URLs as shown and stored: hand-written answers for each shape a user can give."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_specperf import cli
from pytest_specperf.storage.saved_runs import run_meta
from pytest_specperf.storage.store import HistoryError, Target, parse_target
from pytest_specperf.urls import redact_text, redact_url, request_parts


@pytest.mark.parametrize(("given", "shown"), [
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),  # nothing to hide: exactly as given
    ("https://host/v1/", "https://host/v1/"),
    ("http://ci:s3cret@host:8000/v1", "http://ci:***@host:8000/v1"),
    ("http://TOKEN@host", "http://***@host"),  # a user name alone is often the token itself
    ("http://ci:@host", "http://ci:***@host"),
    ("http://host/v1?api-version=2024-06-01&key=abc", "http://host/v1?api-version=***&key=***"),
    ("http://host?bare-token", "http://host?***"),
    ("http://host?a=1;b=2&c=", "http://host?a=***;b=***&c=***"),
    ("http://host/path#frag", "http://host/path#***"),
    ("http://u:p@w@host?k=v", "http://u:***@host?k=***"),  # the last @ ends the userinfo
    ("u:secret@host:8000", "***@host:8000"),  # no scheme: whatever precedes the @ is masked
    ("/tmp/history.sqlite", "/tmp/history.sqlite"),
    # a / ? or # in the password ends urlsplit's netloc early: everything up to the last @ is still the user's
    ("http://ci:pa/ss@host:8000", "http://ci:***@host:8000"),
    ("http://ci:pa#ss@host:8000/v1", "http://ci:***@host:8000/v1"),
    ("http://ci:pa?ss@host?k=v", "http://ci:***@host?k=***"),
    ("http://to/ken@host", "http://***@host"),  # no clean user name: all masked
])
def test_redact_url(given: str, shown: str) -> None:
    assert redact_url(given) == shown
    assert redact_url(shown) == shown  # masking twice changes nothing


def test_a_postgres_url_is_shown_as_the_history_has_always_shown_its_password() -> None:
    url = "postgresql://ci:pw@db.example:5432/perf"
    assert redact_url(url) == Target(url=url).shown() == "postgresql://ci:***@db.example:5432/perf"


def test_redact_text_masks_every_url_in_a_message_and_keeps_the_sentence() -> None:
    text = ("GET http://a:pw1@h1:1/v1/models?k=q1 failed (see http://h2/x?t=q2), retry "
            "postgresql://ci:pw3@db/x?sslpassword=q3; or http://a?k=q4,http://u:pw5@b")
    assert redact_text(text) == ("GET http://a:***@h1:1/v1/models?k=*** failed (see http://h2/x?t=***), retry "
                                 "postgresql://ci:***@db/x?sslpassword=***; or http://a?k=***,http://u:***@b")


def test_request_parts_keep_the_credentials_and_the_query_pairs_in_order() -> None:
    assert request_parts("http://u:p@h:1/base?b=2&a=1&e=") == ("http://u:p@h:1/base", (("b", "2"), ("a", "1"),
                                                                                         ("e", "")))


def test_run_meta_stores_an_endpoint_given_to_it_masked() -> None:
    meta = run_meta(endpoint="http://ci:pw@host:8000?key=abc")
    assert meta["endpoint"] == "http://ci:***@host:8000?key=***"


@pytest.mark.parametrize("given", ["postgresq://u:PASSWORD@h/db", "mysql://u:PASSWORD@h/db"])
def test_a_history_url_with_a_wrong_scheme_is_refused_without_its_password(
        given: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--storage", str(tmp_path), "history", "--history", given]) == 2
    err = capsys.readouterr().err
    assert "unknown scheme" in err and "u:***@h/db" in err, err
    assert "PASS" not in err, err


def test_parse_target_names_a_wrong_scheme_without_the_password(tmp_path: Path) -> None:
    with pytest.raises(HistoryError) as caught:
        parse_target("postgresq://u:PASSWORD@h/db", tmp_path)
    assert "'postgresq://u:***@h/db'" in str(caught.value) and "PASS" not in str(caught.value)


def test_every_command_error_is_printed_with_its_urls_masked(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # a name given where a run was expected is echoed back in the error: a URL in it is masked
    assert cli.main(["--storage", str(tmp_path), "show", "http://u:PASSWORD@h/x"]) == 2
    err = capsys.readouterr().err
    assert "u:***@h/x" in err and "PASS" not in err, err
