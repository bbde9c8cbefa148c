"""Conductor mode (Sakana's Conductor, ICLR 2026): for each question one model writes the
whole workflow (a member, a subtask and an access list per step: conductor/workflow.py), and trinity
runs it. The other end of the scale from the turn-by-turn coordinator (episode/loop.py).

Who conducts: `ConductorSpec.conductor`, else the pool file's `conductor:` (a member, or a
model entry of its own), else the pool's first member. Its prompt (`conduct_messages`) gives
the task, the usable members with a line each (`description:` in the pool file, else its
style's `STYLE_NOTES`), and asks for the three lists; it is called greedily with its Worker
reply cap, and the call is recorded as a Thinker turn (override "conductor", `max_tokens` set).
When the conductor's backend can decode under a JSON schema (Backend.supports_json_schema:
llama.cpp members, OpenAI-compatible servers marked `structured_outputs`), the call carries
workflow.workflow_schema and a cap of at least SCHEMA_REPLY_TOKENS, so it can only write a
workflow that reads as written; the record says `constrained`. Other backends are read
leniently and repaired (workflow.read_workflow).

Running: steps run in dependency order (`workflow.levels`); the steps of one level read
nothing from each other and run at once on up to the pool's `parallel` threads. Each step
is one Worker call to its member in the member's style: the task, exactly the outputs its
access list grants (clipped to `prompts.HISTORY_CHARS`, shorter until they fit), its subtask,
and the style's step instructions (the last step: the style's Worker instructions, since its
output is the answer). A `program` member's program runs in the sandbox (turns/program.py); on a
code task, a step's code is run against the task's shown examples (turns/settle.py) and later
steps see that run. A member that runs several steps makes fresh attempts after its first,
seeded exactly as in episodes (pool.Pool.params), so parallel solvers are not one reply
three times. Recursion: a step naming the conductor (`workflow.SELF`) runs a nested
workflow, whose task is the task, the subtask and the outputs granted, while the depth is
below `ConductorSpec.depth` (0 disables it); deeper, the conductor's model does the step as a
plain step (noted in `repairs`). The last step's output is the answer.

The last step's output must hold the answer: on a code task it is asked for the complete code
(the kind's `last_step_note`), and when its reply holds no answer the scorer can read (turns/settle.gives_answer)
it is asked once more, as a fresh attempt told what was missing (REASK); the step's record
says `reasked`.

A reply that cannot be read without guessing (workflow.read_workflow) is refused in one line
and the question falls back to the `agree` procedure (episode/schedules.agree: the usable
members in pool order, each from the task alone, until two answers agree; code until one passes
its examples; at most AGREE_TURNS calls), played by episode/loop.py exactly as bench's `agree`
row (stop_reason "fallback"). Its record lists each of its calls as a step of its own
("Solve the task.", reading nothing) and its answer is the settled one. Every call goes through the rollout cache, so
replaying a run makes no model call.

Numbering: every turn is built once, with its final index (level by level, in step order; a
nested workflow's turns inside its step; the fallback's after the conductor's turn, through
run_episode's `first_index`). A step's first index is known before it is played: in a level,
only the workflow's last step can take two turns (asked again), and it is the last of its
level; a level holding a nested workflow, whose turns are counted only once played, plays its
steps one after another. Results do not depend on `parallel`.

Workflow record (`Transcript.workflow`, the top level; nested ones alike):
    {"conductor": model name, "depth": 0, "turn": the conductor's turn index,
     "workflow": Workflow.to_dict() (what ran; the fallback's when it fell back),
     "topology": workflow.topology(...) ("agree" for the fallback), "repairs": [...],
     "fallback": the problem or null, "constrained": the workflow was written under its schema,
     "steps": [{"model", "subtask", "access": [j...], "turns": [turn indices],
                "nested": a nested record or null, "reasked": the step was asked again}, ...]}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from trinity_cli.answer_kinds import resolve_kind
from trinity_cli.answer_kinds.base import AnswerKind, Checks
from trinity_cli.answer_kinds.short import SHORT
from trinity_cli.conductor.workflow import (
    MAX_STEPS,
    SELF,
    ConductorSpec,
    Reading,
    Workflow,
    levels,
    read_workflow,
    topology,
    workflow_schema,
)
from trinity_cli.episode.loop import attempt_salt, run_episode, usable_models
from trinity_cli.episode.schedules import AGREE_TURNS, agree
from trinity_cli.episode.turn import Call, fit, play
from trinity_cli.errors import ContextOverflow, option
from trinity_cli.events import ProgressFn, TurnPlayed, quiet
from trinity_cli.messages import ChatMessage, Role, Transcript, Turn
from trinity_cli.pool.pool import Pool
from trinity_cli.turns import prompts
from trinity_cli.turns.settle import gives_answer

FALLBACK_SUBTASK = "Solve the task."
OUTPUT_CLIPS = (prompts.HISTORY_CHARS, 800, 400, 200)  # tried in turn until a step's prompt fits
# The reply cap of a workflow written under its schema (at least): room for MAX_STEPS steps
# of SUBTASK_CHARS characters, so the JSON is never cut off before it closes.
SCHEMA_REPLY_TOKENS = 512

STYLE_NOTES = {
    "reason": "works step by step and explains briefly",
    "direct": "gives a short answer with no working; fast",
    "program": "writes a Python program that trinity runs and reports; good for arithmetic, counting and code",
}

CONDUCT = (
    "You are the conductor of this team. Do not solve the task: write the workflow that solves it, "
    "as one JSON object with three lists of equal length:\n"
    '"model_id": the assistant that does each step, from the list below;\n'
    '"subtasks": what each step must do, one short instruction;\n'
    '"access_list": which earlier outputs each step reads: [] for the task alone, "all" for every '
    "earlier step, or step numbers such as [0, 2] (steps count from 0).\n"
    "The last step's output is the team's answer, so the last step must give the final answer. "
    "Use at most {max_steps} steps, and only as many as the task needs.\n\n"
    "Assistants:\n{members}\n\n"
    "Example, for another task:\n{example}\n\n"
    "Reply with the JSON object only."
)
EXAMPLE_SUBTASKS = ["Solve the task.", "Solve the task in your own way.",
                    "Compare the two answers, fix what is wrong, and give the final answer."]
SELF_NOTE = "you yourself: do the step by writing a workflow of its own (use it rarely)"

STEP = {
    "reason": "Do only your part of the work, step by step and briefly; do not go beyond it.",
    "direct": "Do only your part of the work, in a few words and without working.",
    "program": ("Do your part by writing a short Python program that prints its result. Reply with one "
                "```python block and nothing else; use only the standard library."),
}
STEP_REQUEST = "Do your part now."
FINAL_NOTE = "Your output is the team's final answer."
REASK = ("Your reply above gave no final answer, and your output is the team's answer: give the final "
         "answer now, in the form asked for.")


def conduct_messages(pool: Pool, task: str, members: Sequence[str], context: Sequence[ChatMessage] = (),
                     max_steps: int = MAX_STEPS, allow_self: bool = True) -> list[ChatMessage]:
    """The conductor's messages (`CONDUCT`): the members it may use, with a line each."""
    lines = []
    for name in members:
        model = pool.config.model(name)
        lines.append(f"- {name}: {model.description or STYLE_NOTES[model.style]}")
    if allow_self:
        lines.append(f"- {SELF}: {SELF_NOTE}")
    first, second = members[0], members[1 % len(members)]
    example = json.dumps({"model_id": [first, second, first], "subtasks": EXAMPLE_SUBTASKS,
                          "access_list": [[], [], "all"]})
    instructions = CONDUCT.format(max_steps=max_steps, members="\n".join(lines), example=example)
    user = "\n\n".join([*prompts.opening(task, context), instructions])
    return [ChatMessage("system", prompts.SYSTEM), ChatMessage("user", user)]


def step_messages(task: str, workflow: Workflow, index: int, outputs: dict[int, str], notes: dict[int, str],
                  style: str, context: Sequence[ChatMessage] = (), limit: int = prompts.HISTORY_CHARS,
                  kind: AnswerKind = SHORT) -> list[ChatMessage]:
    """Step `index`'s messages: the task, the outputs its access list grants (`outputs`,
    with `notes` such as an example run under them, each clipped to `limit`), its
    subtask, and its style's step (or, for the last step, Worker) instructions; on a code
    task the last step is asked for the code itself (the kind's `last_step_note` for the
    member's style)."""
    parts = prompts.opening(task, context)
    reads = workflow.access[index]
    if reads:
        shown = [f"[Step {j} · {workflow.model_id[j]}]\n{prompts.clip(outputs[j], limit)}"
                 + (f"\n{notes[j]}" if j in notes else "") for j in reads]
        parts.append("Outputs of earlier steps:\n" + "\n\n".join(shown))
    last = index == len(workflow) - 1
    parts.append(f"Your part of the team's work (step {index} of {len(workflow)}): {workflow.subtasks[index]}")
    if last:
        note = kind.last_step_note(style)
        code = f" {note}" if note else ""
        parts.append(f"{FINAL_NOTE}{code} {prompts.INSTRUCTIONS[style][Role.WORKER]}\n"
                     f"{prompts.REQUEST[style][Role.WORKER]}")
    else:
        parts.append(f"{STEP[style]}\n{STEP_REQUEST}")
    return [ChatMessage("system", prompts.SYSTEM), ChatMessage("user", "\n\n".join(parts))]


def nested_task(task: str, subtask: str, shown: Sequence[str]) -> str:
    """The task of a nested workflow: the task, the part to do, and the outputs granted."""
    text = f"{task}\n\nThe part to work out now: {subtask}"
    if shown:
        text += "\n\nWhat the team has so far:\n" + "\n\n".join(prompts.clip(s) for s in shown)
    return text


# A played step: its output, its turns, a nested workflow's record or None, a repair note or
# None, whether it was asked again for a missing answer.
_Step = tuple[str, list[Turn], dict[str, Any] | None, str | None, bool]


@dataclass
class _Done:
    """A finished workflow: its answer, its turns in order, its record (turns as objects
    until `_numbered` writes their indices)."""

    answer: str | None
    turns: list[Turn]
    record: dict[str, Any]


@dataclass
class _Conducting:
    """What stays the same over one question's workflows, and how each part is played."""

    pool: Pool
    spec: ConductorSpec
    conductor: str
    members: list[str]
    task: str
    context: list[ChatMessage]
    kind: AnswerKind
    examples: Checks | None
    salt: str = ""

    def workflow(self, task: str, depth: int, first: int,
                 emit: Callable[[list[Turn]], None] | None = None) -> _Done:
        """Write and run one workflow for `task` at `depth`, its turns numbered from `first`
        (module docstring)."""
        turns: list[Turn] = []

        def add(batch: list[Turn]) -> None:
            turns.extend(batch)
            if emit is not None:
                emit(batch)

        written, reading = self._conduct(task, depth, first)
        add([written])
        if reading.workflow is None:
            return self._agree(task, depth, written, reading, add)
        workflow = reading.workflow
        outputs: dict[int, str] = {}
        notes: dict[int, str] = {}
        steps: list[dict[str, Any]] = [{} for _ in range(len(workflow))]
        repairs = list(reading.repairs)
        for level in levels(workflow):
            done = self._level(task, workflow, level, outputs, notes, depth, first + len(turns))
            for i, (output, step_turns, nested, repair, reasked) in zip(level, done, strict=True):
                outputs[i] = output
                repairs += [repair] if repair else []
                last = step_turns[-1]
                note = last.examples if nested is None and last.examples_passed is not None else None
                if note is not None:
                    notes[i] = self.kind.check_note(note)
                add(step_turns)
                steps[i] = {"model": workflow.model_id[i], "subtask": workflow.subtasks[i],
                            "access": list(workflow.access[i]), "turns": step_turns, "nested": nested,
                            "reasked": reasked}
        record = {"conductor": self.conductor, "depth": depth, "turn": written, "workflow": workflow.to_dict(),
                  "topology": topology(workflow), "repairs": repairs, "fallback": reading.problem,
                  "constrained": self._constrained(), "steps": steps}
        return _Done(outputs[len(workflow) - 1], turns, record)

    def _level(self, task: str, workflow: Workflow, level: list[int], outputs: dict[int, str],
               notes: dict[int, str], depth: int, first: int) -> list[_Step]:
        """Play the steps of one level, numbered from `first` (module docstring): at once on
        the pool's `parallel` threads, or one after another when one runs a nested workflow."""
        if any(self._nests(workflow, i, depth) for i in level):
            done: list[_Step] = []
            for i in level:
                done.append(self._step(task, workflow, i, outputs, notes, depth, first))
                first += len(done[-1][1])
            return done
        # Only the workflow's last step can take two turns, and it is the last of its level.
        return self._map([partial(self._step, task, workflow, i, outputs, notes, depth, first + k)
                          for k, i in enumerate(level)])

    def _nests(self, workflow: Workflow, index: int, depth: int) -> bool:
        """Whether step `index` runs a nested workflow (it names the conductor, above the
        depth limit)."""
        return workflow.model_id[index] == SELF and depth < self.spec.depth

    def _agree(self, task: str, depth: int, written: Turn, reading: Reading,
               add: Callable[[list[Turn]], None]) -> _Done:
        """The fallback of a workflow that cannot be read: the agree procedure on `task`
        (module docstring), its calls recorded as steps reading nothing."""
        source = agree(self.pool.names, self.members)
        source.label = "fallback: agree" + (f" (depth {depth})" if depth else "")
        episode = run_episode(task, self.pool, source, max_turns=AGREE_TURNS, kind=self.kind,
                              usable=set(self.members), context=self.context, examples=self.examples,
                              first_index=written.index + 1)
        turns = episode.turns
        add(turns)
        workflow = Workflow(tuple(t.model for t in turns), tuple(FALLBACK_SUBTASK for _ in turns),
                            tuple(() for _ in turns))
        steps = [{"model": t.model, "subtask": FALLBACK_SUBTASK, "access": [], "turns": [t], "nested": None,
                  "reasked": False} for t in turns]
        record = {"conductor": self.conductor, "depth": depth, "turn": written, "workflow": workflow.to_dict(),
                  "topology": "agree", "repairs": list(reading.repairs), "fallback": reading.problem,
                  "constrained": self._constrained(), "steps": steps}
        return _Done(episode.answer, [written, *turns], record)

    def _constrained(self) -> bool:
        return self.pool.backend(self.conductor).supports_json_schema()

    def _map(self, jobs: list[Callable[[], Any]]) -> list[Any]:
        workers = min(self.pool.config.parallel, len(jobs))
        if workers <= 1:
            return [job() for job in jobs]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trinity-step") as executor:
            return list(executor.map(_call, jobs))

    def _conduct(self, task: str, depth: int, index: int) -> tuple[Turn, Reading]:
        """The conductor's call for `task` and what was read from it: a Thinker turn (turn
        `index`) with its Worker reply cap (module docstring), played by the turn machinery."""
        allow_self = depth < self.spec.depth
        messages = conduct_messages(self.pool, task, self.members, self.context, self.spec.max_steps, allow_self)
        overflow = ContextOverflow(f"the conductor {self.conductor!r} cannot hold the task in its context of "
                                   f"{self.pool.backend(self.conductor).n_ctx} tokens",
                                   f"shorten the question, or choose another {option('conductor')}")
        messages, _ = fit(self.pool, self.conductor, Role.WORKER, [messages], overflow)
        cap = self.pool.params(self.conductor, Role.WORKER.value).max_tokens
        schema = None
        if self.pool.backend(self.conductor).supports_json_schema():
            # Not canonical_json: sorted keys would reach the grammar as the properties'
            # order, and the conductor would write its access lists before its steps.
            schema = json.dumps(workflow_schema(self.members, self.spec.max_steps, allow_self),
                                separators=(",", ":"), ensure_ascii=False)
            cap = max(cap, SCHEMA_REPLY_TOKENS)
        call = Call(model=self.conductor, role=Role.THINKER, messages=messages, answering=False, max_tokens=cap,
                    split_last=bool(self.context),
                    json_schema=schema, override="conductor" + (f" (depth {depth})" if depth else ""))
        turn = play(self.pool, call, index, self.salt, self.examples)
        return turn, read_workflow(turn.reply, self.members, self.spec.max_steps, allow_self=True)

    def _step(self, task: str, workflow: Workflow, index: int, outputs: dict[int, str], notes: dict[int, str],
              depth: int, first: int) -> _Step:
        """Play step `index`, its turns numbered from `first` (what `_Step` holds)."""
        model, subtask = workflow.model_id[index], workflow.subtasks[index]
        if self._nests(workflow, index, depth):
            shown = [outputs[j] for j in workflow.access[index]]
            nested = self.workflow(nested_task(task, subtask, shown), depth + 1, first)
            return nested.answer or "", nested.turns, nested.record, None, False
        repair = None
        if model == SELF:
            model = self.conductor
            repair = f"step {index}: recursion deeper than {self.spec.depth}: the conductor does it as a step"
        style = self.pool.style(model)
        candidates = (step_messages(task, workflow, index, outputs, notes, style, self.context, limit, self.kind)
                      for limit in OUTPUT_CLIPS)
        overflow = ContextOverflow(f"step {index}: model {model!r} cannot hold the task and the outputs it reads",
                                   "shorten the question, or raise n_ctx in the pool file")
        messages, _ = fit(self.pool, model, Role.WORKER, candidates, overflow)
        attempt = sum(m == model or (m == SELF and model == self.conductor)
                      for m in workflow.model_id[:index])
        label = f"step {index}" + (f" (depth {depth})" if depth else "")
        call = Call(model=model, role=Role.WORKER, messages=messages, answering=True, attempt=attempt,
                    override=label, split_last=bool(self.context))
        turn = play(self.pool, call, first, self.salt, self.examples, run_examples="with code")
        if index < len(workflow) - 1 or gives_answer(turn.reply, self.kind):
            return turn.reply, [turn], None, repair, False
        # The last step must answer: asked once more, shown its reply and what was missing.
        again, _ = fit(self.pool, model, Role.WORKER,
                       [[*messages, ChatMessage("assistant", turn.reply), ChatMessage("user", REASK)], messages],
                       overflow)
        call = Call(model=model, role=Role.WORKER, messages=again, answering=True, attempt=attempt + 1,
                    override=f"{label}, asked again", split_last=bool(self.context))
        retry = play(self.pool, call, first + 1, self.salt, self.examples, run_examples="with code")
        return retry.reply, [turn, retry], None, repair, True


def _call(job: Callable[[], Any]) -> Any:
    return job()


def _numbered(record: dict[str, Any]) -> dict[str, Any]:
    """`record` with its Turn objects replaced by their indices (nested records too)."""
    steps = []
    for step in record["steps"]:
        nested = _numbered(step["nested"]) if step["nested"] is not None else None
        steps.append({**step, "turns": [t.index for t in step["turns"]], "nested": nested})
    return {**record, "turn": record["turn"].index, "steps": steps}


def run_conductor(
    task: str,
    pool: Pool,
    spec: ConductorSpec | None = None,
    exclude: Collection[str] = (),
    context: Sequence[ChatMessage] = (),
    kind: AnswerKind | str | None = None,
    examples: Checks | None = None,
    progress: ProgressFn | None = None,
    usable: Collection[str] | None = None,
) -> Transcript:
    """Answer `task` in conductor mode (module docstring); `progress` receives TurnPlayed for
    each turn once numbered: the conductor's as soon as it is read, a level's steps when the
    level is done.
    `exclude`d members are not offered to the conductor, nor run (the conductor itself may
    still conduct); `usable`: the members a caller already found usable (episode/loop.usable_models),
    None to check here. Raises ContextOverflow when no member, or the conductor, can hold the task.
    `kind`: the task's answer kind, resolved here once as run_episode resolves it (an `AnswerKind`,
    its name, or None for the kind the task's wording asks for); every step, and the fallback,
    is given that object."""
    spec = spec or ConductorSpec()
    conductor = spec.name(pool)
    usable = set(usable if usable is not None else usable_models(pool, task, exclude, context))
    members = [m for m in pool.names if m in usable]
    conducting = _Conducting(pool, spec, conductor, members, task, list(context), resolve_kind(kind, task), examples,
                             salt=attempt_salt(task, context))
    numbered: list[Turn] = []

    def emit(batch: list[Turn]) -> None:
        for turn in batch:
            assert turn.index == len(numbered), (turn.index, len(numbered))  # built with its final index
            numbered.append(turn)
            (progress or quiet)(TurnPlayed(turn))

    done = conducting.workflow(task, 0, 0, emit)
    transcript = Transcript(task=task, context=list(context), turns=numbered, answer=done.answer,
                            stop_reason="fallback" if done.record["fallback"] else "workflow")
    transcript.workflow = _numbered(done.record)
    return transcript
