"""A conductor's workflow drawn in the terminal (Rich): each step with its member, its
subtask, the earlier outputs it reads and the turns that played it; nested workflows under
the step that ran them. Reads the workflow record of conductor/run.py's docstring."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from rich.tree import Tree


def _reads(access: list[int]) -> str:
    return "the task only" if not access else "steps " + ", ".join(str(j) for j in access)


def _turns(indices: list[int]) -> str:
    if not indices:
        return ""
    shown = indices[0] + 1 if len(indices) == 1 else f"{indices[0] + 1}-{indices[-1] + 1}"
    return f"turn {shown}" if len(indices) == 1 else f"turns {shown}"


def _label(record: dict[str, Any]) -> Text:
    label = Text(f"workflow by {record['conductor']}", style="bold")
    label.append(f"  {record['topology']}, {len(record['steps'])} steps", style="magenta")
    label.append(f"  (turn {record['turn'] + 1})", style="dim")
    if record.get("fallback"):
        label.append(f"\nrefused: {record['fallback']}: the agree procedure ran instead", style="red")
    for repair in record.get("repairs") or []:
        label.append(f"\nrepaired: {repair}", style="yellow")
    return label


def _grow(tree: Tree, record: dict[str, Any]) -> None:
    for i, step in enumerate(record["steps"]):
        line = Text(f"step {i} ", style="bold")
        line.append(f"{step['model']:<18}", style="cyan")
        line.append(f" reads {_reads(step['access'])}", style="dim")
        line.append(f"  {_turns(step['turns'])}", style="dim")
        line.append("\n" + step["subtask"])
        branch = tree.add(line)
        if step.get("nested"):
            nested = branch.add(_label(step["nested"]))
            _grow(nested, step["nested"])


def workflow_tree(record: dict[str, Any]) -> Tree:
    """The workflow record as a tree: the conductor and the shape, then a branch per step."""
    tree = Tree(_label(record), guide_style="dim")
    _grow(tree, record)
    return tree
