"""What the multi-call ports take from the released MQuAKE-Remastered implementation
(henryzhongsc/MQuAKE-Remastered @ 59eb58c3, CC BY 4.0): its prompt files, pinned by sha256,
its relation -> sub-question table, and the text rules its loops apply to a generation.
The rules are re-implemented from reading the release (not copied); each docstring names
the function it follows.

Stop strings: the release stops generation with token-id criteria that, through an
off-by-one, compare every stop token but the first. As strings, for the Qwen tokenizer:
"Retrieved fact:" -> "rieved fact:", "Done." -> "." (any period), "This ends the block:"
-> " ends the block:". These are the strings used here, so generation stops where the
release's does.
"""
from __future__ import annotations

from pathlib import Path

from common.errors import DataError
from common.io import sha256_file

PROMPT_SHA256 = {  # data/mquake_remastered/prompts/*.txt at the release commit
    "MeLLo-prompt.txt": "1df6654d0da8e33da54b4e5ef176b52722b4c5a65c44bf5785b372826be6de2a",
    "extract_entity.txt": "879c406c102e10751eb852a1c7320d046892ee0af6340d1c46411ae597ca1853",
    "fill_out_ga_w_blank2.txt": "6aaa9b37d0728245bf139af69666224a831be8a47b77a6637179eed873eab569",
    "relation2subq_prompt2.txt": "e812e2b8d2c7bf09e0f7681439608bf4bf13bb3f554b879d97adce21da2bc749",
    "subq_breakdown.txt": "7a5e291936b17b13ecfb128696d98f1085f8da12fd499a865b592e96ff645731",
}
STOP_FACT = "rieved fact:"  # the release's "facts" criterion
STOP_DONE = "."  # its "done" criterion
STOP_BLOCK = " ends the block:"  # its "end_block" criterion (the prompt writes "block.": never met)

# pipeline/inference_mquake.py REL2SUBQ: relation template -> sub-question (the release's
# spellings kept, "origianl" and "univeristy" included: they are lookup keys).
REL2SUBQ = {
    "{} is a citizen of": "What is the country of citizenship of {}?",
    "The author of {} is": "Who is the author of {}?",
    "The capital of {} is": "What is the capital of {}?",
    "{} is located in the continent of": "Which continent is {} located in?",
    "{} was created by": "Who created {}?",
    "{} was born in the city of": "Which city was {} born in?",
    "{} is associated with the sport of": "Which sport is {} associated with?",
    "{} was created in the country of": "Which country was {} created in?",
    "The official language of {} is": "What is the official language of {}?",
    "{} is married to": "Who is {} married to?",
    "{} was founded by": "Who founded {}?",
    "{} plays the position of": "What position does {} play?",
    "The name of the current head of the {} government is": "Who is the current head of the {} government?",
    "The company that produced {} is": "Which company produced {}?",
    "{} is affiliated with the religion of": "Which religion is {} affiliated with?",
    "{} was developed by": "Who developed {}?",
    "The headquarters of {} is located in the city of": "Which city is the headquarters of {} located in?",
    "{} was founded in the city of": "Which city was {} founded in?",
    "The origianl broadcaster of {} is": "Who is the original broadcaster of {}?",
    "{} is employed by": "Who employs {}?",
    "{} speaks the language of": "Which language does {} speak?",
    "The name of the current head of state in {} is": "Who is the current head of state in {}?",
    "{} died in the city of": "Which city did {} die in?",
    "The chairperson of {} is": "Who is the chairperson of {}?",
    "{} was performed by": "Who performed {}?",
    "The type of music that {} plays is": "What type of music does {} play?",
    "{}'s child is": "Who is the child of {}?",
    "The {} is": "What is the {}?",
    "{} works in the field of": "Which field does {} work in?",
    "{} worked in the city of": "Which city did {} work in?",
    "The head coach of {} is": "Who is the head coach of {}?",
    "The univeristy where {} was educated is": "Which university was {} educated at?",
    "The director of {} is": "Who is the director of {}?",
    "{} is famous for": "What is {} famous for?",
    "The chief executive officer of {} is": "Who is the chief executive officer of {}?",
    "{} was written in the language of": "Which language was {} written in?",
    "The origianl language of {} is": "What is the origianl language of {}?",
    "The original language of {} is": "What is the original language of {}?",
}


def load_prompt_file(prompts_dir: str | Path, name: str) -> str:
    """A released prompt, checked against its pinned sha256 and read as the release reads
    it (text mode: the files' CRLF line ends become LF)."""
    path = Path(prompts_dir) / name
    if not path.is_file():
        raise DataError(f"{path}: released prompt missing (see ../shared/data/README.md, mquake_remastered_prompts/)")
    if (digest := sha256_file(path)) != PROMPT_SHA256[name]:
        raise DataError(f"{path}: sha256 {digest} is not the released file's {PROMPT_SHA256[name]}")
    return path.read_text(encoding="utf-8")


def drop_extra_blocks(text: str, marker: str = "Question: ", keep: int = 5) -> str:
    """mquake_utils.remove_extra_target_occurrences: when a generation starts a further
    few-shot block (a (keep+1)-th `marker`), cut it and the two characters before it."""
    if text.count(marker) <= keep:
        return text
    index = 0
    for _ in range(keep + 1):
        index = text.find(marker, index) + len(marker)
    return text[:index - len(marker) - 2]


def final_answer(text: str, task_prompt: str, shots: int = 4) -> str | None:
    """mquake_utils.able_to_quit: once the text holds a final answer beyond the few-shot
    ones, the rest of that line, a trailing period dropped; None before that."""
    if text.count("Final answer: ") < shots + 1:
        return None
    line = text[text.find("Final answer: ", len(task_prompt) + 13):].strip().split("\n")[0]
    answer = line[len("Final answer: "):]
    return answer[:-1] if answer.endswith(".") else answer


def chain_entities(line: str) -> list[str]:
    """mquake_utils.extract_entities: the parenthesised segments of 'S->(r1)->(r2)->answer'."""
    return [seg.strip()[1:-1] for seg in line.split("->") if "(" in seg and ")" in seg]
