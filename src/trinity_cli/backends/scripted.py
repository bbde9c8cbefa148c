"""A scripted backend for tests and demos: replies come from regex rules, no model runs.

The first rule whose `match` regex is found in the last message's content wins; otherwise
`default`. Token counts are whitespace word counts, so runs are fully deterministic.
A reply's `{seed}` is replaced by the call's sampling seed and `{name}` by the model's name,
so fresh attempts (sampled, from derived seeds: pool.Pool.params) can differ from the first
reply as a real model's do. `delay_s` makes every reply take that long (the reply itself does not change), so tests
and demos can see calls overlap; `latency_s` reports the time the call took. `raises`: every call
raises RuntimeError with that text, as a broken plugin's backend would (pool/pool.py: a failed turn).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from trinity_cli.backends import confidence
from trinity_cli.backends.base import Backend
from trinity_cli.member_config import MemberBase, Strict
from trinity_cli.messages import ChatMessage, Completion, GenParams


class ScriptRule(Strict):
    match: str
    reply: str
    # The mean log-probability its tokens report (backends/confidence.py); None: 0.0.
    logprob: float | None = Field(default=None, le=0)

    @model_validator(mode="after")
    def _regex(self) -> ScriptRule:
        try:
            re.compile(self.match)
        except re.error as exc:
            raise ValueError(f"bad regex {self.match!r}: {exc}") from None
        return self


class ScriptedModel(MemberBase):
    """A `scripted` member: answers with the reply of the first rule whose regex matches the
    last message."""

    kind: Literal["scripted"]
    answers_at_once: ClassVar[bool] = True
    rules: list[ScriptRule] = []
    default: str = ""
    n_ctx: int = Field(default=4096, ge=256)
    delay_s: float = Field(default=0.0, ge=0)  # each reply takes this long: a slow model, for tests and demos
    raises: str = ""  # every call raises RuntimeError(raises): a member that fails, for tests and demos


class ScriptedBackend(Backend):
    gives_logprobs = True  # each token at its rule's `logprob` (0.0 when it has none)
    config_model = ScriptedModel
    summary = "replies from regex rules, no model (tests and demos)"

    def __init__(self, config: ScriptedModel) -> None:
        super().__init__(config.name, config.n_ctx)
        self.config = config
        self.rules = [(re.compile(r.match, re.S), r.reply, r.logprob) for r in config.rules]
        self.calls: list[list[ChatMessage]] = []

    @property
    def fingerprint(self) -> str:
        # A rule's `logprob` (an output, but a cached reply carries it) only where it is set,
        # so the fingerprints of rules without one are as before it existed.
        spec = json.dumps([[r.match, r.reply] + ([r.logprob] if r.logprob is not None else [])
                           for r in self.config.rules] + [self.config.default])
        return "scripted:" + hashlib.sha256(spec.encode()).hexdigest()[:16]

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def chat(self, messages: Sequence[ChatMessage], params: GenParams) -> Completion:
        start = time.perf_counter()
        if self.config.delay_s:
            time.sleep(self.config.delay_s)
        self.calls.append(list(messages))
        if self.config.raises:
            raise RuntimeError(self.config.raises)
        last = messages[-1].content if messages else ""
        text, logprob = next(((reply, lp) for rx, reply, lp in self.rules if rx.search(last)),
                             (self.config.default, None))
        text = text.replace("{seed}", str(params.seed)).replace("{name}", self.name)
        words = text.split()[: params.max_tokens]
        price = self.config.price
        p_tok = self.prompt_tokens(messages)
        return Completion(
            text=" ".join(words) if len(words) < len(text.split()) else text,
            prompt_tokens=p_tok,
            completion_tokens=len(words),
            latency_s=time.perf_counter() - start if self.config.delay_s else 0.0,
            cost_usd=price.cost(p_tok, len(words)) if price else None,
            logprob_stats=confidence.constant(logprob or 0.0, len(words)),
        )
