"""A small OpenAI-compatible server over a local model, so the `openai` reader can be
tested end to end (and a local model can be shared by several processes).

    cmc-harness serve --model-dir DIR --port 8000      (or: python -m readers.serve ...)
    cmc-harness serve --reader qwen25_coder_05b --port 8000

Endpoints: POST /v1/chat/completions and POST /v1/completions (raw text, no chat
template; greedy only: temperature must be 0 or absent; no stop strings, the client cuts)
and GET /v1/models. The `model` field of a request is not checked (as llama.cpp does); the
response always names the served model, which is what the reader records. Thinking follows
the reader's config (off by default); a request's `chat_template_kwargs` override it.

The server also runs in-process (`OpenAIServer(backend, port=0).start()`, or as a context
manager). Tests subclass it (tests/readers/faulty_server.py) to count request bodies and
inject transport faults through `intercept`; the shipped server answers every request.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from common.calls import Constraint, Request
from common.errors import DataError
from readers.structured import response_constraint


@dataclass(frozen=True)
class Completion:
    text: str
    finish_reason: str  # "stop" or "length"
    prompt_tokens: int
    completion_tokens: int


class ChatBackend(Protocol):
    model_id: str

    def complete(self, messages: list[dict[str, str]], max_tokens: int,
                 chat_template_kwargs: dict[str, Any] | None = None, constraint: Constraint | None = None
                 ) -> Completion:
        """Greedy chat completion of `messages`, at most `max_tokens` new tokens, inside the
        constraint if one is given (a request's `response_format`)."""

    def complete_text(self, prompt: str, max_tokens: int) -> Completion:
        """Greedy raw-text continuation of `prompt`, at most `max_tokens` new tokens."""


class ReaderBackend:
    """Serves a local reader (`readers.hf.HFReader` or anything with its public API:
    `name`, `pin`, `tokenizer`, `enable_thinking`, `chat_template_kwargs`, `model_id` and
    `generate(Request)`). Incoming messages are rendered exactly as `HFReader.prepare`
    renders a prompt (chat template, thinking off unless the request's
    `chat_template_kwargs` say otherwise, no extra special tokens), so a served answer is
    the reader's own greedy answer for the same messages."""

    def __init__(self, reader: Any, model_id: str | None = None) -> None:
        self.reader = reader
        self.model_id = model_id or reader.model_id

    def encode(self, messages: list[dict[str, str]],
               chat_template_kwargs: dict[str, Any] | None = None) -> list[int]:
        kwargs = {"enable_thinking": self.reader.enable_thinking, **self.reader.chat_template_kwargs,
                  **(chat_template_kwargs or {})}
        text = self.reader.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **kwargs)
        return list(self.reader.tokenizer(text, add_special_tokens=False)["input_ids"])

    def complete(self, messages: list[dict[str, str]], max_tokens: int,
                 chat_template_kwargs: dict[str, Any] | None = None, constraint: Constraint | None = None
                 ) -> Completion:
        ids = self.encode(messages, chat_template_kwargs)
        request = Request(self.reader.name, self.reader.pin, "served", tuple(messages),
                          {"max_new_tokens": max_tokens, "do_sample": False}, tuple(ids), constraint=constraint)
        return self._answer(request)

    def complete_text(self, prompt: str, max_tokens: int) -> Completion:
        return self._answer(self.reader.prepare_completion(prompt, "served", max_tokens))

    def _answer(self, request: Request) -> Completion:
        pred = self.reader.generate(request)
        if pred.error is not None or pred.raw is None:
            raise RuntimeError(pred.error or "reader returned no answer")
        return Completion(pred.raw, pred.finish_reason or "stop", pred.usage.get("prompt_tokens", len(request.input_ids)),
                          pred.usage.get("completion_tokens", 0))


def load_backend(model_dir: str | Path | None = None, reader: str | None = None,
                 dtype: str = "auto", served_model_name: str | None = None) -> ReaderBackend:
    """A backend from a saved model folder (`HFReader` over `HubModel(local_path=...)`), or
    from a reader config: a name under conf/reader/ or a path to a YAML file."""
    if (model_dir is None) == (reader is None):
        raise ValueError("give exactly one of model_dir and reader")
    if reader is not None:
        from omegaconf import OmegaConf

        from common.configurable import instantiate_known
        from common.locations import conf_dir

        path = Path(reader)
        if not path.suffix:
            path = conf_dir() / "reader" / f"{reader}.yaml"
        if not path.is_file():
            raise DataError(f"{path}: no such reader config (a name under conf/reader/ or a YAML file)")
        return ReaderBackend(instantiate_known(OmegaConf.load(path), str(path)), served_model_name)
    from readers.hf import HFReader
    from readers.models import HubModel

    folder = Path(model_dir).resolve()
    hf = HFReader(name="served", model=HubModel(folder.name, "local", local_path=str(folder)), dtype=dtype)
    return ReaderBackend(hf, served_model_name or folder.name)


class OpenAIServer:
    """ThreadingHTTPServer with the OpenAI chat-completions shape, a request counter and a
    fault queue. Generation is serialised (one at a time) behind a lock."""

    def __init__(self, backend: ChatBackend, host: str = "127.0.0.1", port: int = 0,
                 default_max_tokens: int = 64) -> None:
        self.backend = backend
        self.default_max_tokens = default_max_tokens
        self._generate_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.httpd = ThreadingHTTPServer((host, port), _make_handler(self))
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "OpenAIServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="cmc-serve", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "OpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        try:
            self.httpd.serve_forever()
        finally:
            self.httpd.server_close()

    # -- called by the handler ------------------------------------------------------------

    def intercept(self, handler: BaseHTTPRequestHandler, body: bytes) -> bool:
        """Called with each chat-completions body before it is answered; True means the
        request was dealt with (a subclass's test fault). The shipped server answers all."""
        return False

    def _complete(self, request: dict[str, Any], raw_text: bool = False) -> tuple[int, dict[str, Any]]:
        messages, prompt = request.get("messages"), request.get("prompt")
        if raw_text and not isinstance(prompt, str):
            return 400, _error("`prompt` must be a string")
        if not raw_text and (not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("content"), str) and isinstance(m.get("role"), str)
                for m in messages)):
            return 400, _error("`messages` must be a non-empty list of {role, content} strings")
        if raw_text and request.get("stop"):
            return 400, _error("stop strings are not supported (the client cuts the text)")
        temperature = request.get("temperature") or 0
        if not isinstance(temperature, (int, float)) or temperature != 0:
            return 400, _error("this server is greedy only: temperature must be 0")
        max_tokens = request.get("max_tokens", request.get("max_completion_tokens", self.default_max_tokens))
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            return 400, _error("`max_tokens` must be a positive integer")
        if request.get("stream"):
            return 400, _error("streaming is not supported")
        kwargs, constraint = request.get("chat_template_kwargs"), response_constraint(request.get("response_format"))
        if isinstance(constraint, str) or (raw_text and constraint is not None):
            return 400, _error(constraint if isinstance(constraint, str) else "response_format needs chat completions")
        with self._generate_lock:
            if raw_text:
                done = self.backend.complete_text(prompt, max_tokens)
            else:
                done = self.backend.complete([{"role": m["role"], "content": m["content"]} for m in messages], max_tokens,
                                             kwargs if isinstance(kwargs, dict) else None,
                                             **({"constraint": constraint} if constraint is not None else {}))
        choice = {"index": 0, "text": done.text} if raw_text else {
            "index": 0, "message": {"role": "assistant", "content": done.text}}
        return 200, {
            "id": "chatcmpl-" + hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()[:24],
            "object": "text_completion" if raw_text else "chat.completion",
            "created": int(time.time()),
            "model": self.backend.model_id,
            "choices": [{**choice, "finish_reason": done.finish_reason}],
            "usage": {"prompt_tokens": done.prompt_tokens, "completion_tokens": done.completion_tokens,
                      "total_tokens": done.prompt_tokens + done.completion_tokens},
        }


def _error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind}}


def _make_handler(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

        def log_message(self, format: str, *args: Any) -> None:  # quiet in tests
            pass

        def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            body = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self.send_json(200, {"object": "list", "data": [
                    {"id": server.backend.model_id, "object": "model", "owned_by": "cmc-harness"}]})
            else:
                self.send_json(404, _error(f"no route {self.path}", "not_found"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            route = self.path.rstrip("/")
            if route not in ("/v1/chat/completions", "/chat/completions", "/v1/completions", "/completions"):
                self.send_json(404, _error(f"no route {self.path}", "not_found"))
                return
            if server.intercept(self, body):
                return
            try:
                request = json.loads(body)
                if not isinstance(request, dict):
                    raise ValueError("body is not a JSON object")
            except (ValueError, UnicodeDecodeError) as exc:
                self.send_json(400, _error(f"invalid JSON body: {exc}"))
                return
            try:
                status_code, payload = server._complete(request, raw_text=not route.endswith("chat/completions"))
            except Exception as exc:  # a backend failure is a server error, as in real servers
                self.send_json(500, _error(f"{type(exc).__name__}: {exc}", "server_error"))
                return
            self.send_json(status_code, payload)

    return Handler


def serve_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-dir", help="a saved transformers model + tokenizer folder")
    source.add_argument("--reader", help="a local reader config: name under conf/reader/ or a YAML path")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port (printed on start)")
    parser.add_argument("--served-model-name", default=None, help="model id reported to clients")
    parser.add_argument("--dtype", default="auto", help="with --model-dir: auto (float16 on GPU; on CPU bfloat16 where "
                        "it has avx512_bf16/AMX, else float32), float32, bfloat16 or float16")


def serve_main(args: argparse.Namespace) -> int:
    """`cmc-harness serve`: load the model, print where it is served, serve until Ctrl-C."""
    backend = load_backend(args.model_dir, args.reader, args.dtype, args.served_model_name)
    server = OpenAIServer(backend, args.host, args.port)
    print(f"serving {backend.model_id} at {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def main(argv: list[str] | None = None) -> None:
    """`python -m readers.serve`, kept as an alias of `cmc-harness serve`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    serve_arguments(parser)
    serve_main(parser.parse_args(argv))


if __name__ == "__main__":
    main()
