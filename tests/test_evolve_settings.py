"""`trinity evolve`'s options as one table (evolve/settings.py): the command line's options and
docs/commands.md's table are generated from it and say the defaults each mode really uses; an
option of another mode is refused in one line; the recipe never takes a whole split."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import typer

from trinity_cli import cli
from trinity_cli.errors import ConfigError
from trinity_cli.evolve import recipe, settings
from trinity_cli.evolve.command import EvolveCommand
from trinity_cli.evolve.options import EvolveOptions
from trinity_cli.evolve.reader_recipe import ReaderRecipeOptions
from trinity_cli.evolve.settings import READER, RECIPE, SEARCH, SETTINGS, Derived

from .conftest import run_main, scripted_pool

PAGE = Path(__file__).parents[1] / "docs" / "commands.md"


def nothing_given() -> dict[str, object]:
    return {s.name: (False if s.kind is bool else None) for s in SETTINGS}


def test_the_docs_table_is_the_one_the_settings_make() -> None:
    page = PAGE.read_text(encoding="utf-8")
    shown = re.search(r"<!-- evolve-options:[^>]*-->\n(.*?)\n<!-- /evolve-options -->", page, re.S)
    assert shown is not None, "docs/commands.md lost its evolve-options markers"
    assert shown.group(1) == settings.markdown(), "regenerate the table: python -c 'from trinity_cli.evolve " \
                                                  "import settings; print(settings.markdown())'"


def test_every_setting_is_an_evolve_option_with_its_doc_and_every_modes_default() -> None:
    command = typer.main.get_command(cli.app).commands["evolve"]  # type: ignore[attr-defined]
    params = {p.name: p for p in command.params}
    assert set(params) == {s.name for s in SETTINGS}
    for s in SETTINGS:
        param = params[s.name]
        assert s.flag in param.opts and param.help == s.doc
        if s.kind is not bool:
            assert param.show_default == s.shown_default()
    assert params["minibatch"].show_default == "recipe: every training item; --search-only: 8"
    assert params["sigma0"].show_default == "recipe: 3.0; --search-only: 1.0; --reader: 0.5"


def test_the_tables_defaults_are_the_ones_the_library_runs_with() -> None:
    searched = EvolveOptions()
    for name, value in settings.defaults(SEARCH).items():
        if name in {f.name for f in dataclasses.fields(EvolveOptions)}:
            assert getattr(searched, name) == value, name
    assert searched.popsize is None and isinstance(settings.BY_NAME["popsize"].defaults[SEARCH], Derived)
    reader = ReaderRecipeOptions()
    read = settings.defaults(READER)
    assert (read["generations"], read["popsize"], read["sigma0"], read["cost_weight"], read["reader_calls"]) == (
        reader.generations, reader.popsize, reader.sigma0, reader.cost_weight, reader.calls)
    assert tuple(read["reader_weights"].split(",")) == reader.weights
    opts = recipe.RecipeOptions().evolve_options()
    for name, value in settings.defaults(RECIPE).items():
        if name in recipe.SEARCH:
            assert getattr(opts, name) == value, name
    assert opts.minibatch == 96 and opts.val_size == 294 and opts.decisions == "greedy" and opts.sigma0 == 3.0


@pytest.mark.parametrize("given, says", [
    ({"search_only": True, "dry_run": True}, "`dry_run` is an option of the recipe and --reader"),
    ({"reader": True, "tasks": "gsm8k:train"}, "`tasks` is an option of the recipe and --search-only"),
    ({"generations": 3}, "`generations` is an option of --reader"),
    ({"reader": True, "search_only": True}, "`reader` and `search_only` choose different runs"),
    ({"resume": "run-1", "max_turns": 0}, "`max_turns` must be at least 1"),
    ({"decisions": "best"}, "`decisions`: unknown value 'best'"),
])
def test_an_option_of_another_mode_or_a_bad_value_is_refused(given: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)):
        EvolveCommand.parse({**nothing_given(), **given})


def test_each_mode_takes_its_own_defaults() -> None:
    search = EvolveCommand.parse({**nothing_given(), "search_only": True})
    assert (search.mode, search.verdict) == (SEARCH, False)
    assert search.evolve_options() == EvolveOptions()
    tuned = EvolveCommand.parse({**nothing_given(), "sigma0": 2.0, "init_rotate": False})
    assert tuned.mode == RECIPE and set(tuned.given) == {"sigma0", "init_rotate"}
    opts = tuned.recipe_options().evolve_options()
    assert opts.sigma0 == 2.0 and opts.init_rotate is False and opts.max_turns == 4  # the rest: the recipe's
    reader = EvolveCommand.parse({**nothing_given(), "reader": True, "reader_weights": "all"}).reader_options()
    assert reader.popsize == 16 and len(reader.weights) > 2


def test_the_recipe_takes_32_items_of_a_task_named_without_a_count(tmp_path: Path, monkeypatch, capsys) -> None:
    assert recipe.training_mix("gsm8k:train,arc-challenge:train:200") == "gsm8k:train:32,arc-challenge:train:200"
    pool = scripted_pool(tmp_path, n_models=2)
    command = EvolveCommand.parse({**nothing_given(), "pool": str(pool), "tasks": "gsm8k:train", "budget": 24,
                                   "backbone": "hash:16", "dry_run": True})
    matrix = next(p for p in command.plan().phases if p.name == "matrix")
    assert matrix.calls == 32 * 2 * 2  # 32 items, two members, two replies each: not 800 items
    code, out, err = run_main(["evolve", "--pool", str(pool), "--tasks", "gsm8k:train", "--budget", "24",
                               "--backbone", "hash:16", "--dry-run"], monkeypatch, capsys)
    assert code == 0, err
    assert "128" in err and not (tmp_path / "home" / "runs").exists()
