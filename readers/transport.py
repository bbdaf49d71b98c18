"""What one HTTP attempt's outcome means for the API reader: retried or terminal, and how
long to wait first.

Retry policy (the paper's execution protocol: transport errors may be retried; answer
content never triggers a retry; a terminal failure stays in the denominator):

| outcome of one attempt                                      | retried? |
|-------------------------------------------------------------|----------|
| connect error, read/write/pool timeout, dropped connection   | yes      |
| (httpx NetworkError, TimeoutException, RemoteProtocolError)  |          |
| HTTP 429 (Retry-After honoured, capped at max_backoff_s)    | yes      |
| HTTP 5xx (Retry-After honoured when present)                | yes      |
| HTTP 200 whose body is not decodable JSON                   | yes (1)  |
| any other HTTP 4xx (400, 401, 403, 404, 413, 422, ...)      | no       |
| HTTP 200, valid JSON without a usable `choices[0].message`  | no (2)   |
| HTTP 200 with an answer, including an empty or odd answer   | no       |
| bad configuration (unsupported URL scheme, local protocol)  | no       |

(1) A 200 status whose body does not decode (truncated by a proxy, corrupted bytes) is a
    transport-level corruption: no answer was delivered, and a greedy request is a pure
    function of its body, so sending it again cannot bias the answer.
(2) Well-formed JSON in the wrong shape is the server's deterministic behaviour for this
    request, not a delivery fault; sending it again would give the same thing.

After the last allowed retry, or on a non-retryable outcome, `generate` returns
`Prediction(raw=None, error=...)`; it never raises. Every attempt for one request sends
the same bytes, and a request that got an answer is never sent again.
"""
from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

RETRY_STATUS = frozenset({429}) | frozenset(range(500, 600))


class Retryable(Exception):
    """A transport fault: the same bytes may be sent again, after `wait_hint` seconds if the
    server said (Retry-After)."""

    def __init__(self, message: str, wait_hint: float | None = None) -> None:
        super().__init__(message)
        self.wait_hint = wait_hint


class Terminal(Exception):
    """An outcome sending again would not change: it becomes the request's error."""


def retry_after(response: httpx.Response) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), else None."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def plain(obj: Any) -> Any:
    """Hydra hands over DictConfig/ListConfig; identity needs plain JSON values."""
    if isinstance(obj, Mapping):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


def url_password(url: str) -> str | None:
    """The password in a URL's userinfo (registered as a secret to scrub), if any."""
    try:
        return urlsplit(url).password
    except ValueError:  # not a URL urlsplit can read: preflight names it
        return None
