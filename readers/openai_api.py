"""The `openai` reader: any OpenAI-compatible chat-completions server (a provider, vLLM,
llama.cpp, or `readers.serve`) is a reader by config alone.

The retry policy (which outcomes of one attempt are retried) is readers/transport.py.
"""
from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any, Sequence

import httpx

from common.calls import Prediction, Request, cut_at_stop, strip_think
from common.configurable import configurable
from common.errors import ServiceError
from common.prompt import Prompt
from common.secrets import register_secret, scrub
from readers.structured import response_format
from readers.transport import RETRY_STATUS, Retryable, Terminal, plain, retry_after, url_password

log = logging.getLogger(__name__)


@configurable
class OpenAIReader:
    """Chat completions over HTTP, temperature 0, bounded concurrency, transport retries."""

    def __init__(
        self,
        name: str,
        base_url: str,
        model: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        extra_body: Mapping[str, Any] | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        concurrency: int = 4,
        max_input_tokens: int | None = None,
    ) -> None:
        """`max_new_tokens` is sent as the API's `max_tokens` (the transformers readers' name,
        so an experiment preset sets one knob for every backend). `max_input_tokens` exists
        only to refuse it: cutting evidence to a token cap needs the model's tokenizer."""
        if max_input_tokens is not None:
            raise ValueError(f"{name}: an OpenAI-compatible reader cannot cap input at {max_input_tokens} tokens "
                             f"(no tokenizer here); run this preset with a transformers reader")
        if max_retries < 0 or concurrency < 1 or max_new_tokens < 1:
            raise ValueError("max_retries >= 0, concurrency >= 1 and max_new_tokens >= 1 are required")
        self.name = name
        self._connect_url = str(base_url).rstrip("/")  # as given: it may carry user:password@
        register_secret(url_password(self._connect_url))
        register_secret(os.environ.get(api_key_env) if api_key_env else None)
        self.base_url = scrub(self._connect_url)  # what is recorded and shown
        self.model = str(model)
        self.api_key_env = api_key_env
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.extra_body: dict[str, Any] = plain(extra_body) if extra_body else {}
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.concurrency = int(concurrency)
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()
        self._other_models: set[str] = set()

    # -- identity -------------------------------------------------------------------------

    @property
    def pin(self) -> dict[str, Any]:
        """What enters request identity. Never the key."""
        return {"backend": "openai", "base_url": self.base_url, "model": self.model,
                "extra_body": self.extra_body}

    @property
    def generation(self) -> dict[str, Any]:
        return {"max_tokens": self.max_new_tokens, "temperature": self.temperature}

    def prepare(self, prompt: Prompt, evidence: str, question: str) -> Request:
        return Request(self.name, self.pin, prompt.version,
                       tuple(prompt.messages(evidence, question)), self.generation, None)

    def prepare_completion(self, text: str, prompt_version: str, max_new_tokens: int, stop: Sequence[str] = (),
                           temperature: float = 0.0) -> Request:
        """A /completions request. Stop strings are not sent but cut here (`cut_at_stop`): a
        server drops the stop it matched, and the released methods' parsers read it."""
        return Request(self.name, self.pin, prompt_version, (), {
            "max_tokens": int(max_new_tokens), "temperature": float(temperature), "stop": list(stop)},
            None, completion=text)

    def payload(self, request: Request) -> bytes:
        """The exact bytes POSTed for a request; every retry sends these same bytes.
        `extra_body` is merged at the top level, as the OpenAI SDK does."""
        gen = request.generation
        body: dict[str, Any] = {
            **plain(request.pin.get("extra_body") or {}),
            "model": request.pin.get("model", self.model),
            "max_tokens": gen.get("max_tokens", self.max_new_tokens),
            "temperature": gen.get("temperature", self.temperature),
            "stream": False,
        }
        body.update({"messages": [dict(m) for m in request.messages]} if request.completion is None
                    else {"prompt": request.completion})
        if request.constraint is not None:
            body["response_format"] = response_format(request.constraint)
        return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    # -- transport ------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        register_secret(key)  # scrubbed by value from every stored error and log line
        if key:  # local servers (vLLM, llama.cpp, readers.serve) need none
            headers["Authorization"] = f"Bearer {key}"
        return headers

    @property
    def client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    timeout=httpx.Timeout(self.timeout_s),
                    limits=httpx.Limits(max_connections=self.concurrency * 2,
                                        max_keepalive_connections=self.concurrency),
                )
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> "OpenAIReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _delay(self, attempt: int, hint: float | None) -> float:
        if hint is not None:
            return min(hint, self.max_backoff_s)
        base = min(self.max_backoff_s, self.backoff_s * (2 ** attempt))
        return base * random.uniform(0.75, 1.0)  # jitter so concurrent workers spread out

    def _attempt(self, body: bytes, completion: bool = False) -> Prediction:
        """One POST. Returns a finished prediction (request_id filled in by the caller),
        or raises Retryable / Terminal."""
        route = "completions" if completion else "chat/completions"
        try:
            response = self.client.post(f"{self._connect_url}/{route}", content=body, headers=self._headers())
        except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError,
                httpx.ProxyError, httpx.DecodingError) as exc:
            raise Retryable(f"{type(exc).__name__}: {exc}") from exc
        except httpx.HTTPError as exc:  # UnsupportedProtocol, LocalProtocolError, ...: config
            raise Terminal(f"{type(exc).__name__}: {exc}") from exc

        status = response.status_code
        if status != 200:
            detail = response.text[:300].replace("\n", " ")
            message = f"HTTP {status}: {detail}"
            if status in RETRY_STATUS:
                raise Retryable(message, retry_after(response))
            raise Terminal(message)
        try:
            data = response.json()
        except (ValueError, UnicodeDecodeError) as exc:
            raise Retryable(f"HTTP 200 with undecodable JSON body: {exc}") from exc

        try:
            choice = data["choices"][0]
            content = choice["text"] if completion else choice["message"].get("content")
            if content is not None and not isinstance(content, str):
                raise TypeError(f"content is {type(content).__name__}")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            snippet = json.dumps(data)[:300] if isinstance(data, (dict, list)) else repr(data)[:300]
            field = "text" if completion else "message"
            raise Terminal(f"HTTP 200 without choices[0].{field} ({exc!r}): {snippet}") from exc
        usage = data.get("usage") if isinstance(data, dict) else None
        usage = {k: v for k, v in (usage or {}).items() if isinstance(v, int) and not isinstance(v, bool)}
        model = data.get("model")
        # null content (e.g. all tokens spent on hidden reasoning) is an empty answer: content
        return Prediction("", (content or "") if completion else strip_think(content or ""), choice.get("finish_reason"),
                          usage, str(model) if model is not None else None, None)

    def generate(self, request: Request) -> Prediction:
        """Run one request; transport faults are retried, answers never are. Never raises.
        A completion's text is cut after its first stop string."""
        try:
            body = self.payload(request)
        except Exception as exc:  # unserialisable request: nothing was sent
            return _failed(request, f"cannot encode request: {exc!r}")
        errors: list[str] = []
        for attempt in range(self.max_retries + 1):
            try:
                got = self._attempt(body, request.completion is not None)
            except Retryable as exc:
                errors.append(str(exc))
                if attempt < self.max_retries:
                    time.sleep(self._delay(attempt, exc.wait_hint))
                    continue
                kinds = Counter(e.split(":", 1)[0] for e in errors)
                seen = ", ".join(f"{k} x{n}" for k, n in kinds.items())
                return _failed(request, f"transport failure after {attempt + 1} attempts ({seen}); last: {exc}")
            except Terminal as exc:
                tried = f" (after {attempt} transport retries)" if attempt else ""
                return _failed(request, f"non-retryable{tried}: {exc}")
            except Exception as exc:  # a bug here must not kill a whole run's denominator
                return _failed(request, f"reader error: {type(exc).__name__}: {exc}")
            raw, stopped = cut_at_stop(got.raw or "", request.stop)
            self._note_model(got.model)
            return Prediction(request.id, raw, "stop" if stopped else got.finish_reason, got.usage, got.model, None)
        raise AssertionError("unreachable")

    def _note_model(self, answered: Any) -> None:
        """Warn once per other model a server answers as: a proxy routing `model` elsewhere
        gives answers of another reader under this one's name (each prediction records the
        name it came back with)."""
        if answered is None or str(answered) == self.model:
            return
        with self._lock:
            if str(answered) in self._other_models:
                return
            self._other_models.add(str(answered))
        log.warning("%s: asked for model %r, the server answered as %r; predictions record the model that answered",
                    self.base_url, self.model, str(answered))

    def counters(self) -> dict[str, int]:
        """A server's prefix cache is its own: nothing counted here."""
        return {}

    def freeze(self, frozen_pin: dict[str, Any]) -> None:
        """Nothing to adopt: the pin is the URL, model and body as configured."""

    def preflight(self) -> list[str]:
        """GET {base_url}/models once, so a run can fail fast on a wrong URL or key before
        it turns every question into an error prediction. Raises ServiceError (one line)."""
        try:
            response = self.client.get(f"{self._connect_url}/models", headers=self._headers())
        except httpx.HTTPError as exc:
            raise ServiceError(f"{self.base_url}: unreachable ({type(exc).__name__}: {scrub(str(exc))})") from None
        if response.status_code in (401, 403):
            raise ServiceError(f"{self.base_url}: HTTP {response.status_code}; "
                               f"check the key in ${self.api_key_env}")
        if response.status_code != 200:
            raise ServiceError(f"{self.base_url}/models: HTTP {response.status_code}; is this the server's /v1 address?")
        try:
            return [m.get("id") for m in response.json().get("data", [])]
        except (ValueError, AttributeError):
            return []


def _failed(request: Request, error: str) -> Prediction:
    """A terminal failure, its message scrubbed: error bodies can echo headers and keys."""
    return Prediction(request.id, None, error=scrub(error))
