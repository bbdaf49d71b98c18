"""The one place a request is generated.

Every caller that needs a reader's answer (the runner's generate stage, the LLM frontend's
extraction and alignment calls, multi-call methods) asks this service. It owns what must
hold for all of them alike:

- the prediction store (machine-local SQLite cache) and, for a run, its journal (the
  committable record): a stored or journaled success is never sent again, a stored failure
  is; the two are reconciled in both directions;
- preflight, once per service, before the first request is sent (a wrong URL or key fails
  there, not as hundreds of error predictions);
- the scheduler: at most `reader.concurrency` requests in flight, sent in prefix order;
  on Ctrl-C or a failure the requests in flight finish and are kept, nothing else is sent;
- answers reused across generation caps (`answer_under_cap`): a greedy answer that ended
  by itself is the answer under any cap it fits in, so a run capped at 32 tokens reads the
  answers of the same requests capped at 64 (and back) instead of sending them;
- the counters: requests sent and the reader's prefix-cache counters.

Transport retries inside one call stay with the API reader (they need the HTTP status and
Retry-After); a request whose call ended in a failure is retried here, on the next call.
"""
from __future__ import annotations

import dataclasses
import logging
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import islice
from typing import Callable, Iterable, Iterator, Sequence

from common.calls import Prediction, Reader, Request
from common.errors import DataError
from common.io import canonical_json
from common.progress import Progress
from generation.journal import PredictionJournal
from generation.store import PredictionStore

log = logging.getLogger(__name__)

_NO_GENERATION: ContextVar[str | None] = ContextVar("no_generation", default=None)


@contextmanager
def no_generation(job: str) -> Iterator[None]:
    """Inside this block every GenerationService answers from its store and journals only,
    and a request they do not hold is refused, not sent. A replay or a seal check verifies
    what was recorded: sending would spend the user's credentials on whatever server a
    (possibly foreign) bundle names, and would not check anything."""
    token = _NO_GENERATION.set(_NO_GENERATION.get() or job)  # nested: the outer job names the refusal
    try:
        yield
    finally:
        _NO_GENERATION.reset(token)


def generation_order(requests: Iterable[Request]) -> list[Request]:
    """Requests sorted by their input tokens (messages for readers without a tokenizer), so
    those sharing a prefix, such as every question over one history's latest state, are
    sent one after another and a prefix cache (ours, or a server's) computes it once. In
    question order the single-hop and multi-hop questions of a history are far apart, and
    each long history was prefilled twice. Callers keep their own order for results."""
    return sorted(requests, key=lambda r: r.input_ids if r.input_ids is not None else canonical_json(list(r.messages)))


def capped(request: Request, cap: int) -> Request:
    """The same request under another generation cap (max_new_tokens)."""
    return dataclasses.replace(request, generation={**request.generation, "max_new_tokens": int(cap)})


def is_greedy(generation: dict) -> bool:
    """No sampling: transformers' do_sample=False, or llama.cpp's temperature 0."""
    return generation.get("do_sample") is False or generation.get("temperature") == 0


def answer_under_cap(request: Request, answer: Prediction) -> Prediction | None:
    """`answer`, given to `request` under another cap, as the answer to `request` when it
    provably is: the request is greedy and local (its exact input tokens are fixed, unlike an
    API's), and the answer ended by itself (EOS or a stop string, not the cap) within this
    request's cap. Greedy decoding reads the cap only to stop, so both caps produce the same
    tokens and stop at the same one. The answer keeps its donor's id in `runtime`. None when
    any condition fails (the request is then sent)."""
    cap = request.generation.get("max_new_tokens")
    used = answer.usage.get("completion_tokens")
    if (request.input_ids is None or not is_greedy(request.generation) or not isinstance(cap, int)
            or answer.error is not None or answer.finish_reason != "stop" or used is None or used > cap):
        return None
    return dataclasses.replace(answer, request_id=request.id,
                               runtime={**answer.runtime, "answer_of_request": answer.request_id})


class GenerationService:
    """Generate, cache, journal and count requests for one reader.

    `journal` is the committable record of a run or of an LLM extraction (None for callers
    with nothing to resume, such as a one-off call); `also_read` are journals of the
    same run written elsewhere (its shards'), consulted but never written. `on_finished`
    runs in the calling thread for each fresh prediction, before it is stored (the sittings file).
    `reuse_caps` are the other generation caps whose stored answers a request may take
    (`answer_under_cap`); () sends every request not held under its own id. Without a
    terminal, progress is logged every `progress_every_s` seconds (common/progress.py)."""

    def __init__(self, reader: Reader, store: PredictionStore, journal: PredictionJournal | None = None,
                 on_finished: Callable[[Prediction], None] | None = None, label: str = "generate",
                 also_read: Sequence[PredictionJournal] = (), reuse_caps: Sequence[int] = (),
                 progress_every_s: float = 300.0) -> None:
        self.reader, self.store, self.journal = reader, store, journal
        self.also_read = [j for j in also_read if journal is None or j.path != journal.path]
        self.on_finished, self.label = on_finished, label
        self.reuse_caps = tuple(int(c) for c in reuse_caps)
        self.progress_every_s = progress_every_s
        self.sent = self.reused = 0
        self._preflighted = False

    def stored(self, requests: Sequence[Request]) -> tuple[dict[str, Prediction], list[Request]]:
        """Successes already held (store or journal) by request id, and the requests still to
        send. The journal seeds the store (resuming on another machine) and the store
        backfills the journal (a success stored by an earlier process of this run)."""
        journaled = self.journal.read() if self.journal is not None else {}
        for other in self.also_read:
            journaled = {**other.read(), **journaled}
        done: dict[str, Prediction] = {}
        pending: dict[str, Request] = {}
        backfill: list[Prediction] = []
        for request in requests:
            stored = self.store.get(request.id)
            if (stored is None or stored.error is not None) and request.id in journaled:
                stored = journaled[request.id]
                self.store.put(stored)
            if (stored is None or stored.error is not None) and (stored := self._from_other_cap(request)):
                self.store.put(stored)
                self.reused += 1
            if stored is None or stored.error is not None:
                pending[request.id] = request
                continue
            done[request.id] = stored
            if self.journal is not None and request.id not in journaled:
                backfill.append(stored)
        if self.journal is not None:
            self.journal.append(backfill)
        return done, list(pending.values())

    def _from_other_cap(self, request: Request) -> Prediction | None:
        """The first answer stored for this request under one of `reuse_caps` that is provably
        its answer under its own cap (None: send it). Only the store is read: a run's journal
        holds its own cap's answers (the cap is frozen config), so donors are other runs'."""
        for cap in self.reuse_caps:
            if cap == request.generation.get("max_new_tokens"):
                continue
            donor = capped(request, cap).id
            held = self.store.get(donor)
            if held is not None and (answer := answer_under_cap(request, held)) is not None:
                return answer
        return None

    def generate(self, requests: Sequence[Request]) -> dict[str, Prediction]:
        """Every request's prediction by id: held successes as they are, the rest sent now.
        A failed call comes back as a prediction with `error` set (stored, not journaled)."""
        reused_before = self.reused
        done, pending = self.stored(requests)
        level = logging.INFO if len(requests) > 1 else logging.DEBUG  # one-off calls (extraction) stay quiet
        reused = self.reused - reused_before
        log.log(level, "%s: %d requests to generate (%d already stored%s)", self.label, len(pending), len(done),
                f", {reused} of them answers under another cap" if reused else "")
        if pending and (job := _NO_GENERATION.get()) is not None:
            where = self.journal.path if self.journal is not None else "the prediction store"
            raise DataError(f"{where}: {job} never generates, and {len(pending)} request(s) of {self.label} "
                            f"are not answered there (first {pending[0].id[:12]})")
        if pending:
            self.preflight()
        for prediction in self._send(generation_order(pending)):
            done[prediction.request_id] = prediction
        return done

    def answer(self, request: Request) -> Prediction:
        """One request's prediction (stored, else generated now)."""
        return self.generate([request])[request.id]

    def preflight(self) -> None:
        if (job := _NO_GENERATION.get()) is not None:
            raise DataError(f"{self.label}: {job} never contacts a reader")
        if not self._preflighted:
            self.reader.preflight()
            self._preflighted = True

    def counters(self) -> dict[str, int]:
        """Requests sent by this service and the reader's own counters (prefix cache)."""
        return {"requests_sent": self.sent, **self.reader.counters()}

    def _keep(self, prediction: Prediction) -> Prediction:
        """Count the generation first (the sittings file), then store and journal it: a process
        killed in between has counted an answer it may not have kept (it is sent again, and
        costs again), never kept an answer it did not count."""
        self.sent += 1
        if self.on_finished is not None:
            self.on_finished(prediction)
        self.store.put(prediction)
        if self.journal is not None:
            self.journal.append([prediction])
        return prediction

    def _send(self, ordered: list[Request]) -> Iterator[Prediction]:
        """At most `concurrency` requests are handed to the pool at a time: a pool given every
        request up front would, on Ctrl-C or a failure, go on sending all of them (hours on
        a CPU) and drop the answers. Requests in flight when that happens finish and are kept."""
        if not ordered:
            return
        workers = max(1, int(self.reader.concurrency))
        queue = iter(ordered)
        progress = Progress(self.label, len(ordered), every_s=self.progress_every_s)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"gen-{self.reader.name}") as pool:
            in_flight: set[Future[Prediction]] = {pool.submit(self.reader.generate, r) for r in islice(queue, workers)}
            try:
                while in_flight:
                    for future in wait(in_flight, return_when=FIRST_COMPLETED).done:
                        in_flight.discard(future)
                        yield self._keep(future.result())
                        progress.update()
                        in_flight |= {pool.submit(self.reader.generate, r) for r in islice(queue, 1)}
            except BaseException:
                for future in wait(in_flight).done:
                    if future.exception() is None:
                        self._keep(future.result())
                raise
            finally:
                progress.close()
