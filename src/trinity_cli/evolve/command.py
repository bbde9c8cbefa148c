"""`trinity evolve` as one library call: the options a user gave, resolved against the table
of evolve/settings.py (the mode, and each option's value in it), played by the mode's own
function — the recipe (evolve/recipe.py), the search alone (evolve/evolution.py) or the
reader's recipe (evolve/reader_recipe.py) — under the caps on model calls and dollars
(`max_calls`, `max_usd`: pool/pool.py's `limit_spending`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from trinity_cli.coordinator.reader import WEIGHT_GROUPS
from trinity_cli.evaluators.ray_cluster import RayOptions
from trinity_cli.events import ProgressFn
from trinity_cli.evolve import reader_recipe, recipe, settings
from trinity_cli.evolve.cost import Estimate
from trinity_cli.evolve.evolution import EvolveResult, evolve
from trinity_cli.evolve.options import EvolveOptions
from trinity_cli.evolve.recipe import RecipeResult
from trinity_cli.pool.spending import limit_spending
from trinity_cli.runs.store import RunStore


@dataclass(frozen=True)
class EvolveCommand:
    """What `trinity evolve` was asked (`settings.Resolved`): its mode, every option of it with
    its value (None: the mode works it out) and the names the user set."""

    mode: str
    values: dict[str, Any]
    given: tuple[str, ...]

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> EvolveCommand:
        """From option name -> the user's value (None where not given); see settings.resolve."""
        resolved = settings.resolve(values)
        return cls(resolved.mode, resolved.values, resolved.given)

    @property
    def verdict(self) -> bool:
        """Whether the run ends in a verdict (the recipes), not in the search's head alone."""
        return self.mode != settings.SEARCH

    @property
    def dry_run(self) -> bool:
        return bool(self.values.get("dry_run"))

    def option(self, name: str) -> Any:
        """The value of option `name` (None when it is not one of this mode's)."""
        return self.values.get(name)

    def evolve_options(self) -> EvolveOptions:
        """The head search's options: the values given or defaulted, EvolveOptions' own defaults
        where the mode works one out."""
        names = {f.name for f in fields(EvolveOptions)}
        return EvolveOptions(**{k: v for k, v in self.values.items() if k in names and v is not None})

    def recipe_options(self) -> recipe.RecipeOptions:
        return recipe.recipe_options(self.evolve_options(), self.given, max_calls=self.option("max_calls"),
                                     max_usd=self.option("max_usd"))

    def reader_options(self) -> reader_recipe.ReaderRecipeOptions:
        v = self.values
        named = tuple(w.strip() for w in (v["reader_weights"] or "").split(",") if w.strip())
        weights = WEIGHT_GROUPS if named == ("all",) else named
        return reader_recipe.ReaderRecipeOptions(
            pool=v["pool"], train_matrix=v["train_matrix"], val_matrix=v["val_matrix"], generations=v["generations"],
            popsize=v["popsize"], sigma0=v["sigma0"], cost_weight=v["cost_weight"], seed=v["seed"], name=v["name"],
            out=v["out"], max_calls=v["max_calls"], max_usd=v["max_usd"], weights=weights, calls=v["reader_calls"])

    def plan(self) -> Estimate:
        """What the run will cost (`--dry-run`: the recipes only); nothing is played."""
        if self.mode == settings.READER:
            return reader_recipe.plan(self.reader_options())
        return recipe.plan(self.recipe_options())

    def run(self, progress: ProgressFn | None = None) -> RecipeResult | EvolveResult:
        """Play the mode: a verdict (RecipeResult) or the search's head (EvolveResult)."""
        plays: dict[str, Callable[[ProgressFn | None], RecipeResult | EvolveResult]] = {
            settings.RECIPE: self._recipe, settings.SEARCH: self._search, settings.READER: self._reader}
        return plays[self.mode](progress)

    def record(self, done: RecipeResult | EvolveResult) -> dict[str, Any]:
        """What `--json` prints: the verdict of a recipe, the run record of a search."""
        if isinstance(done, RecipeResult):
            loaded: dict[str, Any] = json.loads(done.verdict_path.read_text(encoding="utf-8"))
            return loaded
        return RunStore().load(done.run_id)

    def _cluster(self) -> RayOptions | None:
        return RayOptions.from_cli(self.values["ray"], self.values["ray_workers"])

    def _recipe(self, progress: ProgressFn | None) -> RecipeResult:
        return recipe.run(self.recipe_options(), progress=progress, parallel=self.values["parallel"],
                          ray=self._cluster())

    def _search(self, progress: ProgressFn | None) -> EvolveResult:
        with limit_spending(self.values["max_calls"], self.values["max_usd"]):
            return evolve(self.evolve_options(), resume=self.values["resume"], progress=progress, given=self.given,
                          parallel=self.values["parallel"], ray=self._cluster())

    def _reader(self, progress: ProgressFn | None) -> RecipeResult:
        return reader_recipe.run(self.reader_options(), progress=progress)
