"""The test server: readers.serve.OpenAIServer plus a request counter and a fault queue.

Fault injection lives here, not in the shipped server. Each incoming chat-completions body
is counted (`counts`, keyed by its sha256; `log` keeps (sha256, what was done) in order)
and consumes one entry of the queue filled by `inject`:

    "ok"        answer normally (also what an empty queue means)
    "<status>"  reply with that HTTP status and a JSON error, e.g. "500", "503", "400"
    "429"       429 with `Retry-After: <retry_after>`; "429:<value>" sets the header value
    "500:<v>"   any status with ":<value>" also sends `Retry-After: <value>`
    "timeout"   hold the request without answering for `timeout_hold_s`, then hang up
    "drop"      read the request, then close the connection without a response
    "badjson"   200 with a truncated, undecodable JSON body
    "nochoices" 200 with well-formed JSON that has no choices
"""
from __future__ import annotations

import hashlib
import threading
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler
from typing import Any

from readers.serve import OpenAIServer


class FaultyServer(OpenAIServer):
    def __init__(self, *args: Any, retry_after: str = "1", timeout_hold_s: float = 5.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.faults: deque[str] = deque()
        self.counts: Counter[str] = Counter()
        self.log: list[tuple[str, str]] = []
        self.retry_after, self.timeout_hold_s = retry_after, timeout_hold_s
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def inject(self, *faults: str) -> None:
        with self._lock:
            self.faults.extend(faults)

    def reset(self) -> None:
        with self._lock:
            self.faults.clear()
            self.counts.clear()
            self.log.clear()

    def stop(self) -> None:
        self._stopping.set()  # release held "timeout" requests first
        super().stop()

    def intercept(self, handler: BaseHTTPRequestHandler, body: bytes) -> bool:
        digest = hashlib.sha256(body).hexdigest()
        with self._lock:
            self.counts[digest] += 1
            fault = self.faults.popleft() if self.faults else "ok"
            self.log.append((digest, fault))
        if fault == "ok":
            return False
        if fault in ("drop", "timeout"):
            if fault == "timeout":
                self._stopping.wait(self.timeout_hold_s)
            handler.close_connection = True
        elif fault == "badjson":
            handler.send_json(200, b'{"id": "chatcmpl-broken", "choices": [{"message": {"content": "')
        elif fault == "nochoices":
            handler.send_json(200, {"id": "chatcmpl-empty", "object": "chat.completion", "choices": []})
        else:
            status, _, retry_after = fault.partition(":")
            if not status.isdigit():
                raise ValueError(f"unknown fault {fault!r}")
            code = int(status)
            headers = {"Retry-After": retry_after or self.retry_after} if (retry_after or code == 429) else {}
            handler.send_json(code, {"error": {"message": f"injected {code}", "type": "injected_fault"}}, headers)
        return True
