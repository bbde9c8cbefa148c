"""The Conductor's workflows: read one from a model's reply, check it, and say in what
order its steps can run and what shape it has.

A workflow is three lists of equal length (the Conductor paper's format):

    model_id      which pool member runs each step, or `SELF` ("conductor"): the conductor
                  itself, which runs a fresh sub-workflow on the draft so far (recursion)
    subtasks      a natural-language instruction for each step
    access_list   which earlier outputs each step reads: [] the question only, "all" every
                  earlier step, [0, 2] steps 0 and 2 (steps count from 0)

The last step's output is the answer.

How a question is run in conductor mode (`ConductorSpec`: who conducts, how deep, how many
steps) is plain data here too, so that what names a conductor run imports no model code.

Reading (`read_workflow`): the reply's first JSON object (or Python literal: single quotes,
trailing commas) holding a `model_id` list, anywhere in the reply (code fences and prose
around it are ignored; it may sit inside another object). Repaired, each with a note in
`Reading.repairs`, because nothing is guessed: a member name in other case or with spaces
around it; an access entry given as one number, as digit strings, as null / "none" (no
earlier output), or as a list holding "all" (every earlier output: Qwen2.5-Coder-1.5B writes
`["all"]`). Refused (`Reading.problem`, one line): no such object, lists missing or of
unequal length, no steps or more than `max_steps`, a subtask that is not text, a member the
pool does not have (or one excluded), an access entry that is not a list of numbers or
"all", and a step reading itself or a later step.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trinity_cli.errors import ConfigError, did_you_mean, option
from trinity_cli.pool_config import CONDUCTOR_SELF

if TYPE_CHECKING:
    from trinity_cli.pool.pool import Pool

SELF = CONDUCTOR_SELF  # how a conductor names itself in `model_id` (recursion)
MAX_STEPS = 5
DEFAULT_DEPTH = 1
# A subtask's length under the schema: bounded, so a workflow written under it always ends
# within the conductor's reply cap (run.py: SCHEMA_REPLY_TOKENS) instead of being cut off.
SUBTASK_CHARS = 100


@dataclass(frozen=True)
class ConductorSpec:
    """How a question is run in conductor mode: `conductor` (None: the pool's), recursion
    `depth`, at most `max_steps` steps. Plain data: it travels in an EpisodeSpec as its
    router (evaluators/local.py), to threads and Ray actors."""

    conductor: str | None = None
    depth: int = DEFAULT_DEPTH
    max_steps: int = MAX_STEPS

    def check(self) -> None:
        """Refuse a negative depth or fewer than one step."""
        if self.depth < 0:
            raise ConfigError(f"{option('conductor_depth')} must be 0 or more, got {self.depth}")
        if self.max_steps < 1:
            raise ConfigError(f"the conductor's max_steps must be at least 1, got {self.max_steps}")

    def name(self, pool: Pool) -> str:
        """The conducting model of `pool`, once `check` passes: `conductor` (--conductor) if
        the pool has that model (a member or its conductor entry), else the pool's
        `conductor_name`. The one place both are checked, before anything runs."""
        self.check()
        if self.conductor is None:
            return pool.config.conductor_name
        known = [m.name for m in pool.config.all_models]
        if self.conductor not in known:
            raise ConfigError(f"{option('conductor')}: the pool {pool.config.name!r} has no model {self.conductor!r}",
                              did_you_mean(self.conductor, known))
        return self.conductor


@dataclass(frozen=True)
class Workflow:
    """A checked workflow: `access[i]` lists the earlier steps step i reads, resolved
    ("all" becomes every index below i), in increasing order."""

    model_id: tuple[str, ...]
    subtasks: tuple[str, ...]
    access: tuple[tuple[int, ...], ...]

    def __len__(self) -> int:
        return len(self.model_id)

    def to_dict(self) -> dict[str, Any]:
        return {"model_id": list(self.model_id), "subtasks": list(self.subtasks),
                "access_list": [list(a) for a in self.access]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Workflow:
        return cls(tuple(data["model_id"]), tuple(data["subtasks"]),
                   tuple(tuple(int(j) for j in a) for a in data["access_list"]))


def workflow_schema(members: list[str], max_steps: int = MAX_STEPS, allow_self: bool = True) -> dict[str, Any]:
    """The JSON schema of every workflow `read_workflow` takes as written: for each length n
    from 1 to `max_steps`, an object with exactly `model_id` (n names of `members`, and `SELF`
    when `allow_self`), `subtasks` (n strings of 1 to SUBTASK_CHARS characters) and
    `access_list` (n entries: step 0 `[]`, step i `"all"` or a list of step numbers below i),
    in that order. A backend that decodes under it
    (Backend.supports_json_schema) can only write a workflow that reads without a repair."""
    names = [*members, SELF] if allow_self else list(members)
    shapes = []
    for n in range(1, max_steps + 1):
        access: list[dict[str, Any]] = [{"const": []}]
        access += [{"oneOf": [{"const": "all"}, {"type": "array", "items": {"enum": list(range(i))}, "maxItems": i}]}
                   for i in range(1, n)]
        shapes.append({"type": "object", "additionalProperties": False,
                       "required": ["model_id", "subtasks", "access_list"],
                       "properties": {
                           "model_id": {"type": "array", "prefixItems": [{"enum": names}] * n,
                                        "minItems": n, "maxItems": n},
                           "subtasks": {"type": "array", "minItems": n, "maxItems": n,
                                        "items": {"type": "string", "minLength": 1, "maxLength": SUBTASK_CHARS}},
                           "access_list": {"type": "array", "prefixItems": access, "minItems": n, "maxItems": n}}})
    return {"oneOf": shapes}


@dataclass
class Reading:
    """What `read_workflow` made of a reply: the workflow, or None and the `problem` that
    refused it; `repairs`, what was read leniently (one line each)."""

    workflow: Workflow | None
    problem: str | None = None
    repairs: list[str] = field(default_factory=list)


def _objects(text: str) -> list[Any]:
    """Every top-level `{...}` in `text` that parses as JSON or as a Python literal, in
    order; braces inside quoted strings do not count."""
    found: list[Any] = []
    start, depth, quote, escaped = -1, 0, "", False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "\"'" and depth:
            quote = ch
        elif ch == "{":
            start = i if depth == 0 else start
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                parsed = _parse(text[start : i + 1])
                if parsed is not None:
                    found.append(parsed)
    return found


def _parse(chunk: str) -> Any:
    try:
        return json.loads(chunk)
    except ValueError:
        pass
    try:  # a Python literal: evaluates no code (ast.literal_eval)
        return ast.literal_eval(chunk)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _holder(value: Any) -> dict[str, Any] | None:
    """The first dict, depth first, that has a `model_id` key."""
    if isinstance(value, dict):
        if "model_id" in value:
            return value
        for inner in value.values():
            found = _holder(inner)
            if found is not None:
                return found
    if isinstance(value, list):
        for inner in value:
            found = _holder(inner)
            if found is not None:
                return found
    return None


def _member(name: Any, members: list[str], allow_self: bool, repairs: list[str], step: int) -> str:
    if not isinstance(name, str):
        raise _Refused(f"step {step}: model_id {name!r} is not a name")
    if name in members or (allow_self and name == SELF):
        return name
    known = [*members, *([SELF] if allow_self else [])]
    matches = [m for m in known if m.lower() == name.strip().lower()]
    if len(matches) == 1:
        repairs.append(f"step {step}: model {name!r} read as {matches[0]!r}")
        return matches[0]
    raise _Refused(f"step {step}: no member {name!r} (members: {', '.join(known)})")


def _access(entry: Any, step: int, repairs: list[str]) -> tuple[int, ...]:
    if isinstance(entry, str) and entry.strip().lower() == "all":
        return tuple(range(step))
    if entry is None or (isinstance(entry, str) and entry.strip().lower() in ("none", "")):
        repairs.append(f"step {step}: access {entry!r} read as []")
        return ()
    if isinstance(entry, int) and not isinstance(entry, bool):
        repairs.append(f"step {step}: access {entry!r} read as [{entry}]")
        entry = [entry]
    if isinstance(entry, list) and any(isinstance(j, str) and j.strip().lower() == "all" for j in entry):
        repairs.append(f"step {step}: access {entry!r} read as \"all\"")
        return tuple(range(step))
    if not isinstance(entry, list):
        raise _Refused(f"step {step}: access_list entry {entry!r} is not a list of step numbers or \"all\"")
    out = []
    for j in entry:
        if isinstance(j, str) and j.strip().isdigit():
            repairs.append(f"step {step}: access {j!r} read as {int(j)}")
            j = int(j)
        if not isinstance(j, int) or isinstance(j, bool):
            raise _Refused(f"step {step}: access_list entry {entry!r} is not a list of step numbers or \"all\"")
        if not 0 <= j < step:
            where = "itself" if j == step else f"step {j}, which does not run before it"
            raise _Refused(f"step {step} reads {where}")
        out.append(j)
    return tuple(sorted(set(out)))


class _Refused(Exception):
    """A workflow that cannot be read without guessing; its message is the problem."""


def read_workflow(reply: str, members: list[str], max_steps: int = MAX_STEPS, allow_self: bool = True) -> Reading:
    """The workflow in `reply` for a pool whose usable members are `members` (module
    docstring); `allow_self`: a step may name the conductor (`SELF`)."""
    repairs: list[str] = []
    holder = next((h for h in map(_holder, _objects(reply)) if h is not None), None)
    if holder is None:
        return Reading(None, "no JSON object with a model_id list in the reply")
    try:
        lists = [holder.get(key) for key in ("model_id", "subtasks", "access_list")]
        missing = [k for k, v in zip(("model_id", "subtasks", "access_list"), lists, strict=True)
                   if not isinstance(v, list)]
        if missing:
            raise _Refused(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not a list")
        ids, subtasks, access = (list(v or []) for v in lists)
        if not len(ids) == len(subtasks) == len(access):
            raise _Refused(f"the lists differ in length (model_id {len(ids)}, subtasks {len(subtasks)}, "
                           f"access_list {len(access)})")
        if not ids:
            raise _Refused("the workflow has no steps")
        if len(ids) > max_steps:
            raise _Refused(f"{len(ids)} steps, more than the {max_steps} allowed")
        for i, text in enumerate(subtasks):
            if not isinstance(text, str) or not text.strip():
                raise _Refused(f"step {i}: the subtask is not text")
        workflow = Workflow(
            tuple(_member(name, members, allow_self, repairs, i) for i, name in enumerate(ids)),
            tuple(s.strip() for s in subtasks),
            tuple(_access(entry, i, repairs) for i, entry in enumerate(access)),
        )
    except _Refused as refused:
        return Reading(None, str(refused), repairs)
    return Reading(workflow, None, repairs)


def levels(workflow: Workflow) -> list[list[int]]:
    """The steps grouped by when they can run: a step's level is one more than the
    highest level among the steps it reads (0 for none). Steps of one level do not read
    each other, so they may run at once."""
    level: list[int] = []
    for reads in workflow.access:
        level.append(1 + max((level[j] for j in reads), default=-1))
    return [[i for i, lv in enumerate(level) if lv == k] for k in range(max(level) + 1)]


def topology(workflow: Workflow) -> str:
    """The workflow's shape in words: "single" (one step), "chain" (every step depends on
    the one before it), "parallel" (some steps do not depend on each other, and no step
    reads more than one), "parallel+merge" (some steps do not depend on each other, and a
    step reads several); "+recursion" is added when a step names the conductor."""
    n = len(workflow)
    before: list[set[int]] = []  # steps each step depends on, directly or not
    for reads in workflow.access:
        before.append(set(reads).union(*(before[j] for j in reads)) if reads else set())
    independent = any(j not in before[i] for i in range(n) for j in range(i))
    merges = any(len(reads) > 1 for reads in workflow.access)
    shape = "single" if n == 1 else "chain" if not independent else "parallel+merge" if merges else "parallel"
    return shape + ("+recursion" if SELF in workflow.model_id else "")
