"""A scripted model for the multi-call methods: a serve backend (`model_id`, `complete`,
`complete_text`) that answers the released MeLLo and G-Walk completion prompts by rules
keyed on the prompt's last lines, from a fixed world of plans (how the model decomposes a
question) and beliefs (what it answers for a subject and relation, stale on purpose where
the fact bank holds an update). It is the test's model: every trace it drives is fully
determined, and it writes past the stop strings as a base model does, so the clients' cut
and the methods' own text rules are exercised.

Served by OpenAIServer (or tests/readers/faulty_server.FaultyServer, to count bodies) and
read with reader=openai.
"""
from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from arms.released import REL2SUBQ
from readers.serve import Completion

AUTHOR, SPOUSE, CITIZEN = "The author of {} is", "{} is married to", "{} is a citizen of"
CAPITAL, SPORT = "The capital of {} is", "{} is associated with the sport of"
CEO, DEVELOPER = "The chief executive officer of {} is", "{} was developed by"

# Real questions of the 6K FactConsolidation history (the quick population's first two).
Q_OMF = "What is the country of citizenship of the spouse of the author of Our Mutual Friend?"  # mh_6k_no0
Q_GOALIE = "Which sport is goaltender associated with?"  # sh_6k_no0
Q_APPLESCRIPT = ("What is the capital city of the country whose citizenship is held by the CEO of the developer "
                 "of AppleScript?")  # mh_6k_no77


@dataclass(frozen=True)
class Hop:
    phrase: str  # what the breakdown call writes in parentheses
    template: str  # the release template the model's statements use
    subquestion: str | None = None  # what the sub-question call writes; default REL2SUBQ's

    def question(self, subject: str) -> str:
        return (self.subquestion or REL2SUBQ[self.template]).format(subject)


@dataclass(frozen=True)
class Plan:
    start: str  # the start entity, as G-Walk ends up with it
    hops: tuple[Hop, ...]
    entity_output: str | None = None  # what the entity call writes after "(" (default: start + ")")


PLANS = {
    Q_OMF: Plan("Our Mutual Friend", (Hop("author", AUTHOR), Hop("spouse", SPOUSE),
                                      Hop("country of citizenship", CITIZEN))),
    Q_GOALIE: Plan("goaltender", (Hop("sport", SPORT),)),
    Q_APPLESCRIPT: Plan("AppleScript", (Hop("developer", DEVELOPER, "Who developed {}?"), Hop("chief executive officer", CEO),
                                        Hop("country of citizenship", CITIZEN), Hop("capital", CAPITAL))),
}
# The model's own answers. The 6K bank holds: Our Mutual Friend's author Charles Darwin (the
# model: Dickens, the history's older version), his spouse Amala Paul, her citizenship
# Belgium (agreed), no fact about Belgium; goaltender's sport pesäpallo (older: ice hockey);
# Apple Inc.'s CEO Vijay Mallya, his citizenship Papal States.
BELIEFS = {
    ("Our Mutual Friend", AUTHOR): "Charles Dickens", ("Charles Dickens", SPOUSE): "Catherine Dickens",
    ("Charles Darwin", SPOUSE): "Emma Darwin", ("Amala Paul", CITIZEN): "Belgium", ("Belgium", CAPITAL): "Brussels",
    ("goaltender", SPORT): "ice hockey", ("AppleScript", DEVELOPER): "Apple Inc.", ("Apple Inc.", CEO): "Tim Cook",
    ("Vijay Mallya", CITIZEN): "India", ("Papal States", CAPITAL): "Vatican City",
}
BLOCK = "\n\nQuestion: "
MELLO_JUDGE = "Retrieved fact {} to generated answer, so the intermediate answer is: {}\n"
GWALK_NEXT = "so continue with this subject: "


def digest(prompt: str, max_tokens: int) -> str:
    return hashlib.sha256(f"{max_tokens}\n{prompt}".encode()).hexdigest()


@dataclass
class ScriptedBackend:
    """`block_after`: once that many calls are answered, the next one waits on `release`
    (after setting `reached`): a test kills its client there. `answered` counts each
    (prompt, cap) this backend returned an answer for."""

    plans: dict[str, Plan] = field(default_factory=lambda: dict(PLANS))
    beliefs: dict[tuple[str, str], str] = field(default_factory=lambda: dict(BELIEFS))
    block_after: int | None = None
    model_id: str = "scripted"
    answered: Counter = field(default_factory=Counter)
    prompts: list[str] = field(default_factory=list)
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    abandoned: bool = False

    def complete(self, messages: list[dict[str, str]], max_tokens: int,
                 chat_template_kwargs: dict[str, Any] | None = None) -> Completion:
        raise AssertionError("the methods send raw-text completions only")

    def complete_text(self, prompt: str, max_tokens: int) -> Completion:
        if self.block_after is not None and sum(self.answered.values()) >= self.block_after:
            self.reached.set()
            self.release.wait(120)
            if self.abandoned:
                raise RuntimeError("the client of this call was killed")
        text = self.respond(prompt)
        self.answered[digest(prompt, max_tokens)] += 1
        self.prompts.append(prompt)
        return Completion(text, "stop", len(prompt.split()), len(text.split()))

    def respond(self, prompt: str) -> str:
        lines = prompt.split("\n")
        if prompt.endswith('Extracted entity: ('):
            return self.entity(lines[-2][len('Question: "'):-1])
        if prompt.endswith("->") and lines[-2] == "Extract relations in square parentheses into follows:":
            return self.breakdown(lines[-3])
        if prompt.endswith("The corresponding question is"):
            return self.subquestion(lines[-2])
        block = prompt[prompt.rindex(BLOCK) + 2:].strip().split("\n")
        if "so the intermediate answer is:" in prompt:
            return self.mello(block)
        if GWALK_NEXT in prompt:
            return self.gwalk(block)
        raise AssertionError(f"no rule for a prompt ending {prompt[-200:]!r}")

    def believe(self, subject: str, template: str) -> str:
        if (subject, template) not in self.beliefs:
            raise AssertionError(f"the script has no belief for {template.format(subject)!r}")
        return self.beliefs[(subject, template)]

    # -- G-Walk's calls ---------------------------------------------------------------------

    def entity(self, question: str) -> str:
        plan = self.plans[question]
        written = plan.entity_output if plan.entity_output is not None else plan.start + ")"
        return written + '\n\nExample 6:\nQuestion: "Who wrote it?"\nExtracted entity: (it). Done.'

    def breakdown(self, question: str) -> str:
        chain = "->".join(f"({hop.phrase})" for hop in self.plans[question].hops)
        return chain + '->answer"\n\nGiven this problem:\n"Who is it?"\nExtract relations. Done.'

    def subquestion(self, line: str) -> str:
        phrase, subject = re.fullmatch(r'Given this relation: "(.*)" and this subject: "(.*)",', line).groups()
        hop = next(h for plan in self.plans.values() for h in plan.hops if h.phrase == phrase)
        return f' "{hop.question(subject)}"\nThis ends the block.\n\nGiven this relation: "capital" and this subject:'

    def gwalk(self, block: list[str]) -> str:
        plan = self.plans[block[0][len("Question: "):]]
        hop = plan.hops[sum(line.startswith("Subquestion: ") for line in block) - 1]
        subject = next((line.split(GWALK_NEXT)[1].removesuffix(".") for line in reversed(block) if GWALK_NEXT in line),
                       plan.start)
        answer = self.believe(subject, hop.template)
        return f"Generated answer: {hop.template.format(subject)} {{}}. {answer}\nRetrieved fact: {answer} it is."

    # -- MeLLo's calls ----------------------------------------------------------------------

    def mello(self, block: list[str]) -> str:
        plan = self.plans[block[0][len("Question: "):]]
        subjects = [plan.start] + [line.split(": ")[-1] for line in block if "so the intermediate answer is:" in line]
        done = sum(line.startswith("Subquestion: ") for line in block)
        if not block[-1].startswith("Retrieved fact: "):
            return self.ask(plan.hops[0], subjects[0])
        hop, subject = plan.hops[done - 1], subjects[done - 1]
        tentative, fact = self.believe(subject, hop.template), block[-1][len("Retrieved fact: "):]
        prefix = hop.template.format(subject) + " "
        told = fact[len(prefix):].removesuffix(".") if fact.startswith(prefix) else tentative
        text = MELLO_JUDGE.format("does not contradict" if told == tentative else "contradicts", told)
        if done < len(plan.hops):
            return text + self.ask(plan.hops[done], told)
        # A base model goes on into a further few-shot block: the method must cut it.
        return text + f"Final answer: {told}\n\nQuestion: Who is {told}?\n" + self.ask(plan.hops[0], told)

    def ask(self, hop: Hop, subject: str) -> str:
        answer = self.believe(subject, hop.template) if (subject, hop.template) in self.beliefs else "unknown"
        return (f"Subquestion: {hop.question(subject)}\nGenerated answer: {hop.template.format(subject)} {answer}.\n"
                f"Retrieved fact: {answer} is right.\n")
