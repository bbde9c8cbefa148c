"""What the one-command evolve (evolve/recipe.py) will cost, before it starts: pool calls,
tokens, hours and dollars per phase (`trinity evolve --dry-run`, and the first lines of a run).

Pool calls per phase (cache hits included: which calls are recorded is known only once played):
    matrix    training items x members x k (k replies a member; none when a matrix is given)
    search    the start's rotation episodes (one per training item) and its validation, then
              `budget` training episodes and a validation of the mean every `val_every`
              generations, each episode `turns` calls
    validate  validation items x (members, one call each; `agree`; two heads)
An episode's calls: `TURNS_SHARE` x max_turns, at least 1 (on the default pool, at 4 turns,
`agree` and the shipped head average 2.7 to 2.8 calls a question).
Tokens a call: `PROMPT_TOKENS` of prompt plus `REPLY_SHARE` of the member's reply cap.
Seconds: a member's tokens at the speed its backend has shown on this machine (the rollout
cache's calls under its fingerprint: their seconds over their tokens, up to `SAMPLE` calls read);
a member with no such call is counted at `DEFAULT_TOKENS_PER_S` and named in `unmeasured`
(scripted members take no time).
Dollars: each priced member's price on its share of the tokens (members share calls evenly).

Recorded calls (`recorded_alone`): the calls each member makes from the task alone (its greedy
reply and fresh attempts: the matrix's, and the validation's singles) are known before the run,
so the rollout cache is asked which it holds; a phase's hours and dollars count the calls not
known to be recorded. The search's calls depend on its decisions: none is known recorded, though
a run with recorded calls (or candidates that ask alike) replays many.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from trinity_cli import paths, tasks
from trinity_cli.answer_kinds import answer_kind
from trinity_cli.episode.loop import attempt_salt
from trinity_cli.errors import TrinityError
from trinity_cli.evolve.options import EvolveOptions
from trinity_cli.messages import Role
from trinity_cli.pool.pool import Pool
from trinity_cli.pool.rollout_cache import RolloutCache
from trinity_cli.pool_config import PoolConfig
from trinity_cli.turns import prompts

TURNS_SHARE = 0.7
PROMPT_TOKENS = 250
REPLY_SHARE = 0.6
DEFAULT_TOKENS_PER_S = 40.0  # prompt and reply tokens together, a 1.5B GGUF on 2 CPU cores
SAMPLE = 4000


@dataclass
class Phase:
    """One phase's pool calls, `recorded` of them in the rollout cache already (a floor: the
    calls known before the run), and the tokens, hours and dollars of the rest."""

    name: str
    calls: int
    tokens: int
    hours: float
    usd: float | None
    recorded: int = 0


@dataclass
class Estimate:
    phases: list[Phase]
    unmeasured: list[str] = field(default_factory=list)  # members counted at DEFAULT_TOKENS_PER_S

    @property
    def calls(self) -> int:
        return sum(p.calls for p in self.phases)

    @property
    def hours(self) -> float:
        return sum(p.hours for p in self.phases)

    @property
    def recorded(self) -> int:
        return sum(p.recorded for p in self.phases)

    def summary(self) -> str:
        parts = [f"{p.name} ~{p.calls:,} calls" + (f" ({p.recorded:,} recorded)" if p.recorded else "")
                 for p in self.phases]
        return (f"{', '.join(parts)}; in all ~{self.calls:,} pool calls, ~{self.hours:.1f} h at this machine's "
                f"speed for those not known to be recorded")

    def to_dict(self) -> dict[str, Any]:
        return {"phases": [asdict(p) for p in self.phases], "unmeasured": self.unmeasured,
                "calls": self.calls, "recorded": self.recorded, "hours": round(self.hours, 2)}


def measured_speed(config: PoolConfig) -> dict[str, float]:
    """Tokens a second each member's backend has shown here (module docstring); members
    without a recorded call are left out. Reads the rollout cache; loads no model."""
    if not (paths.home() / "cache" / "rollouts").is_dir():
        return {}
    pool = Pool(config, cache=None, replay_only=True)
    fingerprints = {m.name: pool.backend(m.name).fingerprint for m in config.models}
    seen: dict[str, list[float]] = {}
    cache = RolloutCache()
    try:
        for key in cache.store.keys()[:SAMPLE]:
            value = cache.store.get(key)
            if not isinstance(value, dict) or "request" not in value:
                continue
            reply = value["reply"]
            total = seen.setdefault(value["request"].get("fingerprint", ""), [0.0, 0.0])
            total[0] += float(reply.get("latency_s") or 0.0)
            total[1] += int(reply.get("prompt_tokens") or 0) + int(reply.get("completion_tokens") or 0)
    finally:
        cache.close()
    speeds = {}
    for name, fp in fingerprints.items():
        seconds, tokens = seen.get(fp, [0.0, 0.0])
        if seconds > 0 and tokens > 0:
            speeds[name] = tokens / seconds
    return speeds


def recorded_alone(config: PoolConfig, items: Sequence[tasks.TaskItem], k: int) -> int:
    """How many of the calls each member of `config` makes from the task alone on `items`
    (its greedy reply and k-1 fresh attempts, as bench/matrix.py asks them) the rollout cache
    holds. Each call's messages and parameters are built as the episode loop builds an `sc`
    schedule's (a Worker asked alone); no model is loaded."""
    if not (paths.home() / "cache" / "rollouts").is_dir():
        return 0
    cache = RolloutCache()
    pool = Pool(config, cache=cache, replay_only=True)
    held = 0
    try:
        for item in items:
            salt = attempt_salt(item.prompt, [])
            kind = answer_kind(item.scorer)
            for model in config.names:
                messages = prompts.build_messages(Role.WORKER, item.prompt, [], style=pool.style(model),
                                                  kind=kind, alone=True)
                for attempt in range(k):
                    try:
                        key = pool.cache_key(model, messages, pool.params(model, Role.WORKER.value, attempt, salt))
                    except TrinityError:  # a member that cannot say its key (a missing file): not known
                        continue
                    held += key is not None and cache.get(key) is not None
    finally:
        pool.close()
        cache.close()
    return held


def estimate(options: EvolveOptions, config: PoolConfig, k: int | None) -> Estimate:
    """The cost of a recipe run with these search options (module docstring); `k` None: the
    matrix is given, no matrix phase."""
    members = config.models
    train_items = tasks.sample_items(tasks.parse_mix(options.tasks), seed=options.seed)
    val_items = tasks.sample_items(tasks.parse_mix(options.val_mix()), seed=0)
    n_train, n_val = len(train_items), len(val_items)
    turns = max(1.0, TURNS_SHARE * options.max_turns)
    popsize = options.popsize or 8
    per_gen = popsize * max(1, min(options.minibatch, n_train))
    generations = options.budget // per_gen if per_gen else 0
    validations = 1 + (generations // max(1, options.val_every) if generations else 0)
    calls = {
        "matrix": n_train * len(members) * k if k else 0,
        "search": round((n_train + validations * n_val + generations * per_gen) * turns),
        "validate": round(n_val * (len(members) + 3 * turns)),
    }
    recorded = {"matrix": recorded_alone(config, train_items, k) if k else 0,
                "validate": recorded_alone(config, val_items, 1)}
    return of_calls(config, calls, recorded)


def of_calls(config: PoolConfig, calls: dict[str, int], recorded: dict[str, int] | None = None) -> Estimate:
    """The cost of `calls` pool calls per phase (name -> calls, phases with none left out),
    `recorded` of them (name -> calls) in the rollout cache, each call not recorded as the
    module docstring counts one."""
    members = config.models
    speeds = measured_speed(config)
    per_call = sum(PROMPT_TOKENS + REPLY_SHARE * m.max_tokens for m in members) / len(members)
    seconds_per_token = sum(0.0 if m.answers_at_once else 1.0 / speeds.get(m.name, DEFAULT_TOKENS_PER_S)
                            for m in members) / len(members)
    prices = [m.price for m in members]
    phases = []
    for name, n in calls.items():
        if not n:
            continue
        held = min(n, (recorded or {}).get(name, 0))
        tokens = round((n - held) * per_call)
        usd = None
        if any(p is not None for p in prices):
            share = (n - held) / len(members)
            usd = sum(p.cost(round(share * PROMPT_TOKENS), round(share * REPLY_SHARE * m.max_tokens))
                      for p, m in zip(prices, members, strict=True) if p is not None)
        phases.append(Phase(name, n, tokens, tokens * seconds_per_token / 3600, usd, held))
    return Estimate(phases, [m.name for m in members if m.name not in speeds and m.kind != "scripted"])
