"""Plain data passed between layers: chat messages, generation parameters, completions,
coordinator decisions, turns and transcripts.

Everything here is a dataclass with `to_dict` / `from_dict` so it can be written to JSON
(run files, cache entries) and read back unchanged.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field, fields
from typing import Any


class Role(str, enum.Enum):
    """The three roles the coordinator can give a pool model, in head-logit order."""

    THINKER = "thinker"
    WORKER = "worker"
    VERIFIER = "verifier"


ROLES: tuple[Role, ...] = (Role.THINKER, Role.WORKER, Role.VERIFIER)


@dataclass(frozen=True)
class ChatMessage:
    """One OpenAI-style chat message: `role` is "system", "user" or "assistant"."""

    role: str
    content: str


@dataclass(frozen=True)
class GenParams:
    """Everything that changes a model's reply besides the messages.

    `seed` is passed to the backend. Whether a call may be cached is the backend's to say
    (`Backend.deterministic`): a sampled call (`temperature > 0`) is cached only when its
    backend honours the seed exactly (in-process models), never for API models.
    """

    max_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = 0
    stop: tuple[str, ...] = ()
    # A JSON schema (JSON text, its objects' keys in the order the reply is to write them)
    # the reply must follow, for backends that can constrain decoding to it
    # (Backend.supports_json_schema); None: free text.
    json_schema: str | None = None
    # True for the calls of an episode that continues a conversation (earlier messages as
    # context): a prompt with an assistant message before its last message is then evaluated
    # in chunks that also end where that last message starts, so what a chat computed ahead
    # of the message is kept (backends/chunk_schedule.py; the call's rollout key says so).
    split_last: bool = False
    # With split_last: the new message's text as the last message holds it (a turn prompt holds
    # it after the earlier conversation and the instructions); the prompt is then also chunked
    # where its last occurrence starts. "" (the default): no such point. Never in a cache key
    # itself: the schedule it makes is (backends/chunk_schedule.py).
    split_before: str = ""


@dataclass
class Completion:
    """What a backend returns for one chat call."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    finish_reason: str = "stop"
    cost_usd: float | None = None
    cached: bool = False
    recorded: bool = False  # served from an entry imported from a recording (recordings/)
    # How sure the model was of its tokens (backends/confidence.py's summary), or None when
    # its backend gives none. An output of the call, never part of its cache key.
    logprob_stats: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Completion:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class Decision:
    """One coordinator decision: probabilities over models and roles and the chosen pair.

    `model_probs[i]` is the probability of the pool's i-th model (0 for excluded ones),
    `role_probs` follows `ROLES` order. `alone`: the member is asked from the task alone,
    shown no turns (the fixed `sc` and `agree` procedures; turns/prompts.py: build_messages).
    `told`: the member redraws the latest draft, shown it and told what trinity's checks found
    wrong with it (the `drafts-told` policy; answer_kinds/base.py `redraft_messages`).
    """

    model: str
    role: Role
    model_probs: list[float]
    role_probs: list[float]
    seconds: float = 0.0
    alone: bool = False
    told: bool = False


@dataclass
class Turn:
    """One turn of an episode, as recorded in a run file.

    `role` is the role that acted; `chosen_role` is the coordinator's pick, which differs
    when a Thinker's suggestion or a rule (no answer to verify yet, last turn without an
    answer) overrode it, with the reason in `override`. `reply` is what later turns and
    scorers read: the model's text, plus a program member's output and answer line;
    `execution` is what running that program did (program.Execution as a dict), or None.

    How the call was made: `alone` (shown the task alone, so its answer is independent),
    `attempt` (how many calls this member had in the episode before this one: 0 is its
    greedy first reply), `temperature` and `sample_seed` of a fresh attempt (episode/loop.py).
    How it was settled (turns/settle.py): `examples`, what the task's checks recorded of it (a
    code answer's example run, answer_kinds/examples.py; a free-form answer's stated
    constraints, answer_kinds/constraints.py) or None; `vote`, whether its answer counts
    toward agreement and the plurality (an answer its author was shown does not);
    `agreed_with`, the index of the earlier turn whose answer a Verifier's agreed with.
    `max_tokens`: the reply cap the call was made with when it is not the member's cap for
    `role` (a conductor's workflow call, recorded as a Thinker: conductor/run.py), else None.
    What the call itself showed: `finish_reason` ("stop", or "length" at the reply cap) and
    `logprob_stats` (the member's confidence in its tokens: backends/confidence.py), None when
    unknown (turns recorded before they were kept; a backend that gives none).
    `error`: the call failed (the member's backend raised: pool/pool.py's `MemberFailed`), and
    this is why, in one line; the turn then has no reply, and proposes, verifies, suggests and
    votes nothing (episode/turn.py). None for every call that answered.
    """

    index: int
    model: str
    role: Role
    chosen_role: Role
    model_probs: list[float]
    role_probs: list[float]
    messages: list[ChatMessage]
    reply: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    coordinator_s: float
    cost_usd: float | None = None
    cached: bool = False
    override: str | None = None
    verdict: str | None = None
    verdict_source: str | None = None
    suggestion: Role | None = None
    truncated_turns: int = 0
    execution: dict[str, Any] | None = None
    alone: bool = False
    attempt: int = 0
    temperature: float = 0.0
    sample_seed: int | None = None
    examples: dict[str, Any] | None = None
    vote: bool = False
    agreed_with: int | None = None
    max_tokens: int | None = None
    finish_reason: str | None = None
    logprob_stats: dict[str, Any] | None = None
    error: str | None = None

    @property
    def examples_passed(self) -> bool | None:
        """Whether this answer passed the task's checks (a code answer's examples, a free-form
        answer's stated constraints); None when none were run or none were stated."""
        if self.examples is None or self.examples.get("checked") == 0:
            return None
        return bool(self.examples.get("passed"))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["role"] = self.role.value
        data["chosen_role"] = self.chosen_role.value
        data["suggestion"] = self.suggestion.value if self.suggestion else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        data = dict(data)
        data["role"] = Role(data["role"])
        data["chosen_role"] = Role(data["chosen_role"])
        data["suggestion"] = Role(data["suggestion"]) if data.get("suggestion") else None
        data["messages"] = [ChatMessage(**m) for m in data["messages"]]
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class Transcript:
    """A whole episode: the task, its turns, and how it ended.

    `answer` is the reply turns/settle.py settles on (None only if no turn ever answered);
    `stop_reason` is "accepted" (a Verifier said ACCEPT), "agreed" (two independent answers
    agreed, or a code answer passed its examples, in the fixed `agree` procedure), "read" (a
    reader's score of the replies said stop: coordinator/reader.py),
    "max_turns", "token_budget" or "cost_budget" (episode.run_episode's `token_budget` /
    `cost_budget` was reached), "failed" (every member the decision source could still ask
    had failed: turns/source_rules.py), or in conductor mode "workflow" (the conductor's workflow
    ran) or "fallback" (it could not be read, and a one-step workflow ran instead).
    `workflow`: in conductor mode, the workflow record (conductor/run.py's docstring), else None.
    """

    task: str
    turns: list[Turn] = field(default_factory=list)
    answer: str | None = None
    accepted: bool = False
    stop_reason: str = "max_turns"
    context: list[ChatMessage] = field(default_factory=list)
    workflow: dict[str, Any] | None = None

    @property
    def prompt_tokens(self) -> int:
        return sum(t.prompt_tokens for t in self.turns)

    @property
    def completion_tokens(self) -> int:
        return sum(t.completion_tokens for t in self.turns)

    @property
    def cost_usd(self) -> float | None:
        costs = [t.cost_usd for t in self.turns if t.cost_usd is not None]
        return sum(costs) if costs else None

    @property
    def pool_seconds(self) -> float:
        return sum(t.latency_s for t in self.turns)

    def failures(self) -> dict[str, str]:
        """The members whose calls failed (Turn.error), each with its first failure, in the
        order they failed."""
        found: dict[str, str] = {}
        for turn in self.turns:
            if turn.error is not None:
                found.setdefault(turn.model, turn.error)
        return found

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "context": [asdict(m) for m in self.context],
            "turns": [t.to_dict() for t in self.turns],
            "answer": self.answer,
            "accepted": self.accepted,
            "stop_reason": self.stop_reason,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            **({"workflow": self.workflow} if self.workflow is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Transcript:
        return cls(
            task=data["task"],
            context=[ChatMessage(**m) for m in data.get("context", [])],
            turns=[Turn.from_dict(t) for t in data["turns"]],
            answer=data.get("answer"),
            accepted=bool(data.get("accepted")),
            stop_reason=data.get("stop_reason", "max_turns"),
            workflow=data.get("workflow"),
        )
