"""A loopback HTTP server for the hostile tests: it records every request that reaches it,
any method, and answers each with whatever the test's `respond` says (an error body that
echoes the key, a reply as another model, a 404 on every route)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

# respond(method, path, headers, body) -> (status, JSON payload or raw bytes)
Respond = Callable[[str, str, dict[str, str], bytes], tuple[int, Any]]


class LocalServer:
    def __init__(self, respond: Respond) -> None:
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = dict(self.headers)
                owner.seen.append((self.command, self.path, headers, body))
                status, payload = respond(self.command, self.path, headers, body)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def transcript(self) -> str:
        """Everything received, as text: where a test looks for a leaked secret."""
        return "\n".join(f"{method} {path} {headers} {body!r}" for method, path, headers, body in self.seen)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "LocalServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def chat_reply(model: str, text: str) -> dict[str, Any]:
    """A chat-completions body answering `text` as `model`."""
    return {"model": model, "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": text}}], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
