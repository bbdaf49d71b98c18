"""HFReader on a tiny trained Qwen2 model: exact inputs, evidence-only truncation, greedy
answers that parse, and prefix caching that changes nothing but the work done."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from safetensors.torch import load_file, save_file

from common.calls import Request, strip_think
from common.errors import DataError
from common.prompt import Prompt, load_prompt
from readers.compute import auto_dtype
from readers.hf import HFReader, common_prefix_len
from readers.input_cap import QUESTION_ROOM
from readers.models import HubModel, LocalModel
from scoring.metrics import parse_answer
from tests.readers.tiny_model import EVIDENCE, PROMPT_NAME, QA

CONF = Path(__file__).resolve().parents[2] / "conf" / "reader"
# A second history: same prompt, different evidence, so it shares only the system prefix.
OTHER_EVIDENCE = "Here is a list of facts:\n" + "".join(
    f"{i}. The mayor of Town{i} is Person{i}.\n" for i in range(12))


def make_reader(model_dir: Path, **kwargs) -> HFReader:
    source = HubModel(repo="local/tiny", revision="none", local_path=str(model_dir))
    return HFReader("tiny", source, dtype="float32", device="cpu", **kwargs)


@pytest.fixture(scope="module")
def prompt() -> Prompt:
    return load_prompt(PROMPT_NAME)


@pytest.fixture(scope="module")
def reader(tiny_model_dir: Path) -> HFReader:
    return make_reader(tiny_model_dir)


def test_prepare_is_deterministic_and_pinned(reader: HFReader, prompt: Prompt) -> None:
    first = reader.prepare(prompt, EVIDENCE, QA[0][0])
    again = make_reader(Path(reader.source.local_path)).prepare(prompt, EVIDENCE, QA[0][0])
    assert first.id == again.id and first == again
    assert first.pin["repo"] == "local/tiny" and first.pin["backend"] == "transformers"
    assert {"chat_template_sha256", "dtype", "attn_implementation"} <= set(first.pin)
    assert first.pin["identity_scheme"] == 2 and "transformers" not in first.pin  # versions: runtime only
    assert first.generation == {"max_new_tokens": 64, "do_sample": False}
    assert first.evidence_truncated_tokens == 0
    # The request round-trips through JSON with the same identity.
    assert Request.from_json(first.to_json()).id == first.id
    # Thinking is switched off through the template, as Qwen3's does.
    assert reader.tokenizer.decode(first.input_ids).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_input_cap_left_truncates_evidence_only(tiny_model_dir: Path, prompt: Prompt) -> None:
    long_evidence = EVIDENCE + "".join(f"{i}. The mayor of Town{i} is Person{i}.\n" for i in range(12, 60))
    full = make_reader(tiny_model_dir).prepare(prompt, long_evidence, QA[0][0])
    cap = len(full.input_ids) - 100
    capped = make_reader(tiny_model_dir, max_input_tokens=cap).prepare(prompt, long_evidence, QA[0][0])
    assert len(capped.input_ids) <= cap and capped.evidence_truncated_tokens > 0
    system, user = capped.messages
    assert system == full.messages[0]
    query = prompt.joiner + prompt.query.replace("{question}", QA[0][0])
    assert user["content"].endswith(query)
    kept = user["content"][: -len(query)]
    assert long_evidence.endswith(kept) and len(kept) < len(long_evidence)
    assert kept.endswith("59. The mayor of Town59 is Person59.\n")  # the newest facts survive
    assert capped.input_ids[-12:] == full.input_ids[-12:]  # query tail and generation prompt intact
    with pytest.raises(DataError, match="cannot hold the prompt"):
        make_reader(tiny_model_dir, max_input_tokens=20).prepare(prompt, long_evidence, QA[0][0])


def test_every_question_over_one_evidence_gets_the_same_cut(tiny_model_dir: Path, prompt: Prompt) -> None:
    """Over the cap, the evidence is cut for the rendering without its question (QUESTION_ROOM
    tokens left free), so questions of different lengths share one prefix and a long view is
    prefilled once per evidence, not once per question; a question longer than the room cuts
    further, and a cap smaller than the room still cuts per question."""
    long_evidence = EVIDENCE + "".join(f"{i}. The mayor of Town{i} is Person{i}.\n" for i in range(12, 400))
    reader = make_reader(tiny_model_dir)
    cap = len(reader.prepare(prompt, long_evidence, QA[0][0]).input_ids) - 300
    capped = make_reader(tiny_model_dir, max_input_tokens=cap)
    short, longer = QA[0][0], QA[0][0] + " Please answer with the name of the person only, nothing else."
    a, b = (capped.prepare(prompt, long_evidence, q) for q in (short, longer))
    assert a.evidence_truncated_tokens == b.evidence_truncated_tokens > 0
    assert len(a.input_ids) <= cap and len(b.input_ids) <= cap
    starts = [s for s, _ in capped.tokenizer(long_evidence, add_special_tokens=False,
                                              return_offsets_mapping=True)["offset_mapping"]]
    cut = a.evidence_truncated_tokens
    # Everything before the question is shared: system, the cut evidence, the query's lead-in.
    head = capped._render(prompt, long_evidence[starts[cut]:], "")[1]
    assert common_prefix_len(a.input_ids, b.input_ids) >= common_prefix_len(a.input_ids, head) > cap // 2
    # The cut is the fewest tokens that leave the room free: one token fewer would not.
    assert len(capped._render(prompt, long_evidence[starts[cut]:], "")[1]) <= cap - QUESTION_ROOM
    assert len(capped._render(prompt, long_evidence[starts[cut - 1]:], "")[1]) > cap - QUESTION_ROOM
    # A question longer than the room cuts further; still within the cap.
    huge = short + " " + " ".join(["Town12"] * QUESTION_ROOM)
    c = capped.prepare(prompt, long_evidence, huge)
    assert c.evidence_truncated_tokens > cut and len(c.input_ids) <= cap
    # A cap smaller than the room: cut per question, as small as fits.
    small_cap = len(capped._render(prompt, "", short)[1]) + 40
    d = make_reader(tiny_model_dir, max_input_tokens=small_cap).prepare(prompt, long_evidence, short)
    assert len(d.input_ids) <= small_cap and d.messages[1]["content"] != prompt.messages("", short)[1]["content"]


def test_greedy_generation_is_deterministic_and_parses(reader: HFReader, prompt: Prompt) -> None:
    for question, answer in QA:
        request = reader.prepare(prompt, EVIDENCE, question)
        first, second = reader.generate(request), reader.generate(request)
        assert first == second
        assert first.raw == answer and parse_answer(first.raw) == answer
        assert first.finish_reason == "stop" and first.error is None
        assert first.usage == {"prompt_tokens": len(request.input_ids), "completion_tokens": first.usage["completion_tokens"]}
        assert first.model == "local/tiny@none" and first.request_id == request.id
    # The checkpoint ships sampling defaults; the reader runs plain greedy regardless.
    config = reader.model.generation_config
    # (transformers 5 leaves unset fields None, meaning the greedy defaults)
    assert not config.do_sample and config.temperature in (None, 1.0) and config.repetition_penalty in (None, 1.0)
    assert config.top_k in (None, 50) and config.top_p in (None, 1.0)


def test_token_cap_reports_length(tiny_model_dir: Path, prompt: Prompt) -> None:
    short = make_reader(tiny_model_dir, max_new_tokens=1)
    prediction = short.generate(short.prepare(prompt, EVIDENCE, "what is the capital of France?"))
    assert prediction.finish_reason == "length" and prediction.usage["completion_tokens"] == 1


def test_generate_refuses_a_foreign_request(reader: HFReader, prompt: Prompt) -> None:
    request = reader.prepare(prompt, EVIDENCE, QA[0][0])
    foreign = Request("other", request.pin, request.prompt_version, request.messages, request.generation, request.input_ids)
    with pytest.raises(ValueError, match="prepared for other"):
        reader.generate(foreign)


def test_out_of_memory_becomes_a_failed_prediction(tiny_model_dir: Path, prompt: Prompt,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    oom = make_reader(tiny_model_dir)
    request = oom.prepare(prompt, EVIDENCE, QA[0][0])

    def exhausted(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(oom.model, "generate", exhausted)
    prediction = oom.generate(request)
    assert prediction.raw is None and prediction.error.startswith("OutOfMemoryError")


@pytest.mark.parametrize(("text", "expected"), [
    ("Paris", "Paris"),
    ("<think>\nthe newest fact is 5\n</think>\n\nParis", "Paris"),
    ("<think>\n\n</think>\n\nParis", "Paris"),
    ("the newest fact is 5</think>\nParis", "Paris"),  # the template opened the block
    ("<think>still reasoning when the cap hit", ""),
    ("Paris <think>trailing", "Paris"),
])
def test_strip_think(text: str, expected: str) -> None:
    assert strip_think(text) == expected


def test_prefix_cache_matches_uncached(tiny_model_dir: Path, reader: HFReader, prompt: Prompt) -> None:
    cached = make_reader(tiny_model_dir, prefix_cache=True)
    # Two histories, each asked several questions in a row, then the first one again.
    first = [(EVIDENCE, q) for q, _ in QA]
    other = [(OTHER_EVIDENCE, f"who is the mayor of Town{i}?") for i in range(4)]
    back = [(EVIDENCE, "what is the official language of Brazil?"), (EVIDENCE, QA[0][0])]
    requests = [cached.prepare(prompt, e, q) for e, q in first + other + back]
    assert [r.id for r in requests] == [reader.prepare(prompt, e, q).id for e, q in first + other + back]
    saved = []
    for request in requests:
        before = cached.prefill_tokens_saved
        assert cached.generate(request) == reader.generate(request)
        saved.append(cached.prefill_tokens_saved - before)
    assert cached.prefill_tokens_total == sum(len(r.input_ids) for r in requests)

    def shared(group: list[Request]) -> int:
        return min(common_prefix_len(a.input_ids, b.input_ids) for a in group for b in group if a is not b)

    evidence_prefix = shared(requests[:4] + requests[8:])
    other_prefix = shared(requests[4:8])
    assert evidence_prefix > 100 and other_prefix > 250  # evidence and query head, in tokens
    # Only a history's first question prefills its head; from the second on, the
    # question-independent head known from prepare() is reused whole, also after a switch.
    assert saved[0] == saved[4] == 0
    assert len(set(saved[1:4] + saved[8:])) == 1 and evidence_prefix - QUESTION_ROOM < saved[1] <= evidence_prefix
    assert len(set(saved[5:8])) == 1 and other_prefix - QUESTION_ROOM < saved[5] <= other_prefix
    assert cached.prefill_tokens_saved == sum(saved) < cached.prefill_tokens_total


def _prefill_cuts(reader: HFReader, requests: list[Request]) -> dict[str, list[tuple[int, int]]]:
    """Each request's prefill passes as (first position, tokens), read at the model's forward."""
    passes: list[tuple[int, int]] = []
    forward = reader.model.forward

    def recording_forward(*args, input_ids=None, cache=None, **kwargs):
        if input_ids is not None and input_ids.shape[1] > 1:  # decode steps are one token each
            passes.append((cache.get_seq_length() if cache is not None else 0, input_ids.shape[1]))
        return forward(*args, input_ids=input_ids, cache=cache, **kwargs)

    reader.model.forward = recording_forward
    cuts = {}
    for request in requests:
        passes.clear()
        reader.generate(request)
        cuts[request.id] = list(passes)
    reader.model.forward = forward
    return cuts


def test_prefill_cuts_do_not_depend_on_request_order(tiny_model_dir: Path, prompt: Prompt) -> None:
    """Where a prompt is cut into prefill passes must not depend on what came before it: in
    bf16 another cut can change an answer, so a view resumed from its journal or run in
    another order would differ. Two questions share a long wording after the head (which
    a cache of the previous request's prefix would store and reuse, in one order only)."""
    wording = "Think about the list of facts above and consider each of them carefully, one at a time, " * 3
    questions = [wording + "who is the mayor of Town1?", wording + "who is the mayor of Town2?",
                 "who is the mayor of Town3?"]
    one_go = make_reader(tiny_model_dir, prefix_cache=True)
    requests = [one_go.prepare(prompt, OTHER_EVIDENCE, q) for q in questions]
    in_order = _prefill_cuts(one_go, requests)
    resumed = make_reader(tiny_model_dir, prefix_cache=True)  # a new sitting, the other way round
    reversed_requests = [resumed.prepare(prompt, OTHER_EVIDENCE, q) for q in reversed(questions)]
    assert [r.id for r in reversed_requests] == [r.id for r in reversed(requests)]
    other_way = _prefill_cuts(resumed, reversed_requests)
    # The head is prefilled once in each sitting, by whichever question comes first...
    head = in_order[requests[0].id][0][1]
    for cuts, first in ((in_order, requests[0]), (other_way, reversed_requests[0])):
        assert [p for r, passes in cuts.items() for p in passes if p[0] == 0] == [(0, head)]
        assert cuts[first.id][0] == (0, head)
    # ...and every question is then prefilled from the head's end in one pass, in any order.
    def after_head(cuts: dict[str, list[tuple[int, int]]]) -> dict[str, list[tuple[int, int]]]:
        return {r: [p for p in passes if p[0] > 0] for r, passes in cuts.items()}

    assert after_head(other_way) == after_head(in_order) == {
        r.id: [(head, len(r.input_ids) - head)] for r in requests}


@pytest.mark.parametrize(("config", "repo", "revision", "context"), [
    ("qwen35_4b", "Qwen/Qwen3.5-4B", "851bf6e806efd8d0a36b00ddf55e13ccb7b8cd0a", 262_144),
    ("qwen35_9b", "Qwen/Qwen3.5-9B", "main", 262_144),
    ("llama31_8b", "meta-llama/Llama-3.1-8B-Instruct", "0e9e39f249a16976918f6564b8830bc894c89659", 131_072),
])
def test_reader_configs_instantiate_without_weights(config: str, repo: str, revision: str, context: int) -> None:
    from tests.conftest import compose_config

    reader = instantiate(compose_config(f"reader={config}").reader, _recursive_=True)
    assert isinstance(reader, HFReader) and isinstance(reader.source, HubModel)
    assert reader.name == config and reader.source.pin == {"repo": repo, "revision": revision}
    assert (reader.dtype_setting, reader.attn_implementation, reader.max_new_tokens) == ("auto", "sdpa", 64)
    assert reader.dtype == auto_dtype(reader.device)  # float16 on CUDA, as in the paper; by CPU flags here
    assert reader.max_input_tokens == context  # longer raw histories are cut to the model's window, not overrun
    assert reader.enable_thinking is False and "model" not in vars(reader)  # nothing loaded


def test_local_reader_is_pinned_by_its_weights_not_its_folder(tiny_model_dir: Path, tmp_path: Path,
                                                               prompt: Prompt) -> None:
    """`reader=local` names no hub revision: a copied folder keeps its request ids, a folder
    whose weights differ (a fine-tune of the same model) gets new ones."""
    cfg = OmegaConf.load(CONF / "local.yaml")
    cfg.model.local_path, cfg.device = str(tiny_model_dir), "cpu"
    reader = instantiate(cfg, _recursive_=True)
    assert isinstance(reader.source, LocalModel)
    copy, tuned = tmp_path / "copy", tmp_path / "tuned"
    shutil.copytree(tiny_model_dir, copy)
    metadata = copy / ".cache" / "huggingface" / "download" / "model.safetensors.metadata"
    metadata.parent.mkdir(parents=True)
    metadata.write_text("1733241600.0\n")  # written by a download tool, not part of the model
    shutil.copytree(tiny_model_dir, tuned)
    weights = next(tuned.glob("*.safetensors"))
    tensors = load_file(weights)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 1e-3
    save_file(tensors, weights, metadata={"format": "pt"})

    def request_id(folder: Path) -> str:
        cfg.model.local_path = str(folder)
        return instantiate(cfg, _recursive_=True).prepare(prompt, EVIDENCE, QA[0][0]).id

    original = reader.prepare(prompt, EVIDENCE, QA[0][0]).id
    assert request_id(copy) == original
    assert request_id(tuned) != original
