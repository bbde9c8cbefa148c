"""`trinity evolve`: from a pool file to a validated head (evolve/recipe.py), the search alone
(evolve/evolution.py), or a reader (evolve/reader_recipe.py). Its options are generated from
the table of evolve/settings.py (name, doc, each mode's default, checks), so `--help` shows the
defaults each mode really uses. Registered on `trinity` by cli/__init__.py where it stands
among the commands (this module imports nothing of it)."""

from __future__ import annotations

import inspect
import json
from typing import Annotated, Any

import typer

from trinity_cli.evolve.settings import SETTINGS, Setting

# The Python type of each kind of setting on the command line; None where the mode decides.
_TYPES: dict[Any, Any] = {int: int | None, float: float | None, str: str | None, bool: bool, "toggle": bool | None,
                          list: list[str] | None}


def _parameter(setting: Setting) -> inspect.Parameter:
    """The Typer option of `setting`: its flags, doc, every mode's default as the help shows it,
    its minimum (checked by click, which names the flag)."""
    flags = setting.flags or ((f"{setting.flag}/--no-{setting.flag[2:]}",) if setting.kind == "toggle"
                              else (setting.flag,))
    shown: bool | str = False if setting.kind is bool else setting.shown_default()
    option = typer.Option(*flags, help=setting.doc, show_default=shown, min=setting.minimum, metavar=setting.metavar)
    return inspect.Parameter(setting.name, inspect.Parameter.KEYWORD_ONLY, default=False if setting.kind is bool
                             else None, annotation=Annotated[_TYPES[setting.kind], option])


def evolve(**values: Any) -> None:
    """From a pool file to a validated head: the training matrix, a fitted start, the search, validation against
    agree and each member, a verdict (options given override the recipe's settings); killed runs resume.
    --search-only runs the search alone, --reader makes a reader."""
    from trinity_cli.evolve.command import EvolveCommand
    from trinity_cli.render import console, results
    from trinity_cli.render import progress as render_progress

    command = EvolveCommand.parse(values)
    if command.dry_run:
        results.recipe_plan(command.plan().to_dict())
        return
    shows = render_progress.RecipeProgress if command.verdict else render_progress.EvolveProgress
    with shows(quiet=command.option("quiet")) as progress:
        done = command.run(progress)
    if command.option("as_json"):
        console.out.print_json(json.dumps(command.record(done)))
    render = results.recipe_done if command.verdict else results.evolve_done
    render(done, as_json=command.option("as_json"), quiet=command.option("quiet"))


# Typer reads a command's options from its signature: here, one per setting.
evolve.__signature__ = inspect.Signature([_parameter(s) for s in SETTINGS])  # type: ignore[attr-defined]
