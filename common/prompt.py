"""Reader prompts as versioned data: the same evidence and question always give the same
messages, and the prompt's hash enters every request identity."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from common.errors import DataError
from common.io import canonical_json, sha256_text

PROMPT_DIR = Path(__file__).parent / "prompts"


@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    query: str  # holds the literal placeholder {question}
    joiner: str  # between evidence and query, inside one user message

    @property
    def version(self) -> str:
        """Content hash: any edit to the wording is a new prompt version."""
        return sha256_text(canonical_json([self.system, self.query, self.joiner]))[:16]

    def messages(self, evidence: str, question: str) -> list[dict[str, str]]:
        """MemoryAgentBench's contract: system prompt, then evidence + joiner + query as one
        user message. The question is substituted literally (str.replace), as released."""
        user = evidence + self.joiner + self.query.replace("{question}", question)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


def load_prompt(name: str) -> Prompt:
    path = PROMPT_DIR / f"{name}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        prompt = Prompt(data["name"], data["system"], data["query"], data["joiner"])
    except (OSError, json.JSONDecodeError, KeyError) as exc:
        raise DataError(f"{path}: cannot load prompt {name!r}: {exc}") from exc
    if "{question}" not in prompt.query:
        raise DataError(f"{path}: query has no {{question}} placeholder")
    return prompt
