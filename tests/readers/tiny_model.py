"""A tiny Qwen2-architecture chat model built offline, so reader tests run the real
transformers code paths (chat template, tokenizer, generate, KV caches) with no hub.

The model is trained for a few seconds on the real FactConsolidation prompt (and on one raw
completion, no chat template) so that greedy decoding answers the trained inputs
deterministically: the build checks that every trained answer token wins by at least
MIN_MARGIN logits, far more than any dtype or CPU kernel moves them. Anything else it says
is noise that differs between kernels: tests compare two code paths on it, never its text.
"""
from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from common.prompt import load_prompt

PROMPT_NAME = "memoryagentbench_factconsolidation"
# Qwen2's pre-tokenizer split (transformers' Qwen2Tokenizer and the released tokenizer.json).
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
THINK_TOKENS = ["<think>", "</think>"]  # ordinary added tokens, as in Qwen3: decoding keeps them

# Qwen3's chat template, reduced to what the harness sends: enable_thinking=False closes an
# empty think block in the generation prompt, as the real template does.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)

FACTS = [
    "Thomas Kyd was born in the city of London.",
    "The capital of France is Lyon.",
    "The capital of Japan is Kyoto.",
    "The chief executive officer of Acme is Maria Lopez.",
    "Ada Lovelace is a citizen of United Kingdom.",
    "The capital of France is Paris.",
    "The author of Hamlet is William Shakespeare.",
    "Thomas Kyd was born in the city of Oxford.",
    "The capital of Japan is Tokyo.",
    "The official language of Brazil is Portuguese.",
    "The chief executive officer of Acme is John Smith.",
    "Ada Lovelace works in the field of mathematics.",
]
EVIDENCE = "Here is a list of facts:\n" + "".join(f"{i}. {fact}\n" for i, fact in enumerate(FACTS))
# Trained (question, answer) pairs over EVIDENCE: the newest fact wins, as the prompt asks.
QA = [
    ("what is the capital of France?", "Paris"),
    ("what is the capital of Japan?", "Tokyo"),
    ("in which city was Thomas Kyd born?", "Oxford"),
    ("who is the chief executive officer of Acme?", "John Smith"),
]
# Trained raw completions (prompt text as it is, no chat template): the multi-call methods' calls.
COMPLETIONS = [("who is the chief executive officer of Acme?", "John Smith")]
# The smallest logit gap between a trained answer token and the runner-up the build accepts:
# bfloat16 moves these logits by ~0.1, CPU kernels (AVX2, AVX-512, AMX) by far less.
MIN_MARGIN = 2.0


def chat_text(tokenizer: PreTrainedTokenizerFast, evidence: str, question: str) -> str:
    """The exact text an HFReader with enable_thinking=False renders for this input."""
    messages = load_prompt(PROMPT_NAME).messages(evidence, question)
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                         enable_thinking=False)


def chat_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level BPE with Qwen2's own pre-tokenizer (its split regex, then bytes), so
    decoding is lossless, offsets are exact, and transformers 5, which rebuilds a qwen2
    model's tokenizer from its vocab and merges with that pre-tokenizer, reloads exactly the
    tokenization the model was trained on."""
    prompt = load_prompt(PROMPT_NAME)
    corpus = [prompt.system, prompt.query, EVIDENCE, *(q + " " + a for q, a in QA)] * 4
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=1000, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:], model_max_length=4096)
    tokenizer.add_tokens(THINK_TOKENS)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _examples(tokenizer: PreTrainedTokenizerFast) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded (input_ids, labels) with loss only on 'answer<|im_end|>'. Causal attention
    never lets a real position see the padding after it, so no attention mask is needed."""
    pairs = [(chat_text(tokenizer, EVIDENCE, question), answer) for question, answer in QA] + COMPLETIONS
    rows = []
    for prompt, answer in pairs:
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
        rows.append((prompt_ids + answer_ids, [-100] * len(prompt_ids) + answer_ids))
    width = max(len(ids) for ids, _ in rows)
    ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r, _ in rows])
    labels = torch.tensor([l + [-100] * (width - len(l)) for _, l in rows])
    return ids, labels


def answer_margin(logits: torch.Tensor, target: torch.Tensor) -> float:
    """The smallest gap, over every answer position, between the target token's logit and
    the best other token's: negative where the model would decode something else."""
    answers = target != -100
    scores, wanted = logits[answers], target[answers]
    right = scores.gather(1, wanted[:, None]).squeeze(1)
    others = scores.scatter(1, wanted[:, None], float("-inf")).max(1).values
    return float((right - others).min())


def build_tiny_model(dest: Path, steps: int = 160, seed: int = 0) -> Path:
    """Train and save the tiny model and tokenizer into `dest` (a from_pretrained folder).
    Raises unless every answer token wins by MIN_MARGIN logits, so a model whose trained
    answers could depend on the CPU's kernels fails loudly here, not in the tests using it."""
    tokenizer = chat_tokenizer()
    im_end, endoftext = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        tie_word_embeddings=True, bos_token_id=endoftext, eos_token_id=im_end, pad_token_id=endoftext)
    model = Qwen2ForCausalLM(config)
    ids, labels = _examples(tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    # One thread: matrices this small gain nothing from more, and on a busy machine
    # OpenMP's spin-waiting made the build ten times slower (95 s against 10 s measured).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(steps):
            model(input_ids=ids, labels=labels).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    finally:
        torch.set_num_threads(threads)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, :-1]
    if (margin := answer_margin(logits, labels[:, 1:])) < MIN_MARGIN:
        raise RuntimeError(f"tiny model learned its answers by a margin of {margin:.2f} logits only "
                           f"(wanted {MIN_MARGIN}); raise `steps`")
    # Qwen ships sampling defaults; keeping them here checks that readers override them.
    model.generation_config = GenerationConfig(
        bos_token_id=endoftext, eos_token_id=[im_end, endoftext], pad_token_id=endoftext,
        do_sample=True, temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05)
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    return dest
