"""Credentials are scrubbed by value, not only by shape: an error body that echoes a bare key,
a password holding '@', a token passed into the request body through the environment."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.secrets import REDACTED, register_env_secrets, scrub
from harness.stages import run
from tests.conftest import compose_config
from tests.hostile.servers import LocalServer

KEY = "plainkey0Fa1b2c3d4"           # shaped like no known key format
TOKEN = "body-token-7a7a7a7a"
PASSWORD = "pa@ss:w0rd"              # an '@' inside the password


@pytest.fixture
def server():
    """Answers /models, then every completion with a 503 (retried) and a 400 whose bodies
    echo the bearer key bare, as some providers do."""
    def respond(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict]:
        if method == "GET":
            return 200, {"object": "list", "data": [{"id": "m"}]}
        bare = headers.get("Authorization", "").removeprefix("Bearer ")
        status = 503 if sum(m == "POST" for m, *_ in echo.seen) % 2 else 400
        return status, {"error": {"message": f"Invalid token provided: {bare}"}}

    with LocalServer(respond) as echo:
        yield echo


def files_holding(root: Path, *secrets: str) -> list[str]:
    return [f"{path}: {secret}" for path in root.rglob("*") if path.is_file()
            for secret in secrets if secret.encode() in path.read_bytes()]


def test_no_credential_value_reaches_any_file_of_a_failed_run(tmp_path, server, monkeypatch):
    monkeypatch.setenv("CMC_TEST_KEY", KEY)
    monkeypatch.setenv("CMC_TEST_TOKEN", TOKEN)
    monkeypatch.setenv("CMC_TEST_URL", f"http://user:{PASSWORD}@127.0.0.1:{server.port}/v1")
    run(compose_config("reader=openai", "reader.base_url=${oc.env:CMC_TEST_URL}", "reader.model=m",
                       "reader.api_key_env=CMC_TEST_KEY", "+reader.extra_body.token=${oc.env:CMC_TEST_TOKEN}",
                       "reader.max_retries=1", "reader.backoff_s=0.01", "reader.max_backoff_s=0.02",
                       "arm=cmc", "population=quick", "population.per_cell=1", "population.name=s",
                       "allow_errors=true", f"paths.results_dir={tmp_path / 'results'}",
                       f"paths.cache_dir={tmp_path / 'cache'}"))
    assert sum(m == "POST" for m, *_ in server.seen) >= 2  # the key went out, and came back in error bodies
    bundle = tmp_path / "results" / "bundles" / "adhoc" / "factconsolidation-grammar-s-cmc-openai"
    errors = [json.loads(line)["error"] for line in (bundle / "predictions.jsonl").read_text().splitlines()]
    assert errors and all(f"Invalid token provided: {REDACTED}" in e for e in errors), errors[:2]
    tail = PASSWORD.split("@", 1)[1] + "@127.0.0.1"  # what a userinfo pattern stopping at the first @ left
    assert files_holding(tmp_path, KEY, TOKEN, PASSWORD, tail) == []
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["config"]["reader"]["base_url"] == f"http://127.0.0.1:{server.port}/v1"
    scores = tmp_path / "results" / "scores" / "adhoc" / bundle.name  # sealed with errors: strict JSON, nulls
    items = [json.loads(line, parse_constant=lambda token: pytest.fail(f"{token} in items.jsonl"))
             for line in (scores / "items.jsonl").read_text().splitlines()]
    assert items and all(item["parsed"] is None and item["error"] for item in items)


@pytest.mark.parametrize("url", [f"https://user:{PASSWORD}@host.example/v1", f"https://{PASSWORD}@host.example/v1",
                                 "https://a@b@c@host.example/v1"])
def test_userinfo_is_removed_up_to_the_last_at_sign(url):
    assert scrub(url) == "https://host.example/v1"


def test_only_environment_variables_named_as_credentials_are_scrubbed_by_value(monkeypatch):
    monkeypatch.setenv("CMC_TEST_DB_PASSWORD", "correct-horse-battery")
    monkeypatch.setenv("CMC_TEST_BASE_URL", "http://models.internal:9000/v1")
    register_env_secrets(["${oc.env:CMC_TEST_DB_PASSWORD}", "${oc.env:CMC_TEST_BASE_URL,http://x}"])
    assert scrub("login correct-horse-battery failed") == f"login {REDACTED} failed"
    assert scrub("http://models.internal:9000/v1 answered") == "http://models.internal:9000/v1 answered"


def test_a_credential_read_from_the_environment_is_scrubbed_from_the_moment_the_config_is_checked(monkeypatch):
    monkeypatch.setenv("CMC_TEST_AUTH_TOKEN", "tok-registered-at-check")
    cfg = compose_config("reader=openai", "+reader.extra_body.auth_token=${oc.env:CMC_TEST_AUTH_TOKEN}")
    assert cfg.reader.extra_body.auth_token == "tok-registered-at-check"  # composed, nothing built yet
    assert scrub("HTTP 400: bad token tok-registered-at-check") == f"HTTP 400: bad token {REDACTED}"
