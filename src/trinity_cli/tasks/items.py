"""One benchmark question, as every layer above `tasks/` sees it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TaskItem:
    """A question a pool answers and a scorer grades.

    `task` is the registry name (`gsm8k`, `file:my.jsonl`...), `id` is unique within the
    task and never changes between releases (it decides the item's split), `prompt` is the
    full text sent to the model (question plus answer-format instruction), `reference` is
    what the scorer named by `scorer` compares the reply against. `reference` must be
    JSON-serialisable: a string for the text scorers, a dict for `code` (see scoring.py).
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
