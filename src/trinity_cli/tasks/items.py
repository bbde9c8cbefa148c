"""One benchmark question, as every layer above `tasks/` sees it, and the family it belongs
to: a `TaskFamily` is everything that makes a named task (gsm8k, mbpp, a package's own) one
object, registered by name in registry.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TaskItem:
    """A question a pool answers and a scorer grades.

    `task` is the registry name (`gsm8k`, `file:my.jsonl`...), `id` is unique within the
    task and never changes between releases (it decides the item's split), `prompt` is the
    full text sent to the model (question plus answer-format instruction), `reference` is
    what the scorer compares the reply against: the answer kind named by `scorer`, unless the
    family has a scorer of its own. `reference` must be JSON-serialisable: a string for the
    text scorers, a dict for `code` (see scoring.py).
    """

    task: str
    id: str
    prompt: str
    reference: Any
    scorer: str

    @property
    def key(self) -> str:
        """`task/id`: unique across all tasks."""
        return f"{self.task}/{self.id}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "id": self.id,
            "prompt": self.prompt,
            "reference": self.reference,
            "scorer": self.scorer,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskItem:
        return cls(
            task=str(data["task"]),
            id=str(data["id"]),
            prompt=str(data["prompt"]),
            reference=data["reference"],
            scorer=str(data["scorer"]),
        )


@dataclass(frozen=True)
class TaskFamily:
    """A named task: its items, the answer kind they are read by, and how a reply is scored.

    `answer_kind` is the name of the answer kind (answer_kinds/: "numeric", "choice", "math",
    "exact", "code", "freeform", a package's) its items carry in `TaskItem.scorer`: episodes read
    and compare answers as that kind does; None for `file:` tasks, whose lines each name their
    own. `loader` gives every item, in the source's order (each `TaskItem.task` is `name`).
    `scorer` is the family's own (`score(output, reference) -> 1.0 or 0.0`, never raising on odd
    output); None scores each item with the answer kind its `TaskItem.scorer` names
    (`AnswerKind.score`, a package's kind as well as a built-in one: answer_kinds.score_item),
    and a run whose items name a kind that cannot score is refused before it starts. `package`
    is the distribution that ships the data ("trinity-cli" for `tasks/data/`). `split_counts`
    (test, val): exact split sizes in split-position order instead of the fractions
    (tasks/registry.py), for a fixed published set.
    """

    name: str
    description: str
    answer_kind: str | None
    loader: Callable[[], list[TaskItem]]
    package: str = ""
    scorer: Callable[[str, Any], float] | None = None
    split_counts: tuple[int, int] | None = None

    def load(self) -> list[TaskItem]:
        return self.loader()
