"""`trinity evolve`'s options as one documented table, in the manner of pycma's `CMAOptions`:
each option's name, one-line doc, default in each mode it belongs to, and the check its value
must pass. The command line's options (cli/evolve.py) and the table in docs/commands.md
(`markdown`; tests/test_evolve_settings.py checks the page against it) are generated from it,
and `resolve` turns what a user gave into the values a mode runs with.

Modes (`mode_of`):
    recipe   the default: from a pool file to a verdict (evolve/recipe.py)
    search   `--search-only`, and every `--resume`: the head search alone, as given
             (evolve/evolution.py, `EvolveOptions`, whose defaults are this column)
    reader   `--reader`: a reader from two matrices (evolve/reader_recipe.py,
             `ReaderRecipeOptions`, whose defaults are this column)
An option belongs to the modes it has a default in; given in another mode it is refused, in
one line naming the modes it belongs to. A default in words (`Derived`) is one the mode works
out itself (the recipe's minibatch: every training item).

Training items of the recipe: its matrix asks every member `MATRIX_K` replies per training
item before the first episode, so a task named without a count takes `TRAIN_PER_TASK` items
(as the default mix does), never its whole split; write `gsm8k:train:200` for more.

Nothing here imports more than the errors module: `trinity --help` builds the options from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trinity_cli.errors import ConfigError, option

RECIPE, SEARCH, READER = "recipe", "search", "reader"
MODES = (RECIPE, SEARCH, READER)
# How a mode is named to a user: by the flag that chooses it.
MODE_FLAGS = {RECIPE: "the recipe (no mode flag)", SEARCH: "--search-only (and --resume)", READER: "--reader"}
HEADINGS = {RECIPE: "recipe", SEARCH: "--search-only", READER: "--reader"}

DEFAULT_TASKS = "gsm8k,arc-challenge,mbpp"  # the recipes' tasks
TRAIN_PER_TASK = 32  # the recipe's training items a task named without a count
MIN_VAL = 294  # the recipe's validation items by default, split over the training tasks
MATRIX_K = 2  # the recipe's matrix: replies a member per training item


class Derived(str):
    """A default a mode works out itself, in the words the help and the docs show."""


@dataclass(frozen=True)
class Setting:
    """One option (module docstring). `kind`: int, float, str, bool (a flag, off unless
    given), "toggle" (`--x/--no-x`, the mode's default unless given) or list (repeatable);
    `flags`: the command line's, when not `--name-with-dashes`; `minimum`: the least value
    (checked here and by the command line); `choices`: the values it takes."""

    name: str
    kind: Any
    doc: str
    defaults: Mapping[str, Any] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    minimum: float | None = None
    choices: tuple[str, ...] = ()
    metavar: str | None = None

    @property
    def flag(self) -> str:
        return self.flags[0] if self.flags else "--" + self.name.replace("_", "-")

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(m for m in MODES if m in self.defaults)

    def shown(self, mode: str) -> str:
        """The default in `mode`, as the help and the docs show it."""
        value = self.defaults[mode]
        if isinstance(value, bool):
            return "on" if value else "off"
        if value is None:
            return "none"
        return str(value)

    def shown_default(self) -> str:
        """Every mode's default, in one phrase (`--help`)."""
        shown = {m: self.shown(m) for m in self.modes}
        if len(set(shown.values())) == 1:
            return next(iter(shown.values()))
        return "; ".join(f"{HEADINGS[m]}: {text}" for m, text in shown.items())

    def check(self, value: Any) -> None:
        """Refuse a value below `minimum` or outside `choices`, naming the option."""
        if value is None or isinstance(value, bool):
            return
        if self.minimum is not None and value < self.minimum:
            raise ConfigError(f"{option(self.name)} must be at least {self.minimum:g}, got {value}")
        if self.choices and value not in self.choices:
            raise ConfigError(f"{option(self.name)}: unknown value {value!r}", "use " + " or ".join(self.choices))


ALL = {RECIPE: None, SEARCH: None, READER: None}
PLAYS = {RECIPE: None, SEARCH: None}  # options of the modes that play episodes

SETTINGS: tuple[Setting, ...] = (
    # -- what the run starts from, and what it writes
    Setting("pool", str, "Pool file or name.", {m: Derived("local") for m in MODES}, flags=("--pool", "-p")),
    Setting("seed", int, "Seed of item sampling, the searches and episodes.", {m: 0 for m in MODES}),
    Setting("name", str, "Name of the head (or reader) written.",
            {RECIPE: Derived("POOL-recipe"), SEARCH: Derived("evolved-RUN"), READER: Derived("POOL-reader")}),
    Setting("out", str, "Write the head (or reader) to this directory.",
            {m: Derived("TRINITY_HOME/heads/NAME") for m in MODES}),
    Setting("resume", str, "Continue this evolve run with its own options (only --budget, --device, --name and "
            "--out may change): the search alone.", {SEARCH: None}),
    Setting("search_only", bool, "Run the head search alone with these options: no matrix, start or verdict.",
            {SEARCH: Derived("chooses it")}),
    Setting("reader", bool, "Make a reader instead of a head: it reads what the replies show (confidence, "
            "agreement, shown examples) to decide whom to ask, when to stop and which answer is final; searched "
            "on two matrices of the members' replies, no model call past them.", {READER: Derived("chooses it")}),
    Setting("dry_run", bool, "Say what the run will cost (calls, tokens, hours, USD), then stop.",
            {RECIPE: False, READER: False}),
    Setting("max_calls", int, "Stop after this many model calls (cached calls are free); run again to go on.",
            {m: Derived("no cap") for m in MODES}, minimum=1),
    Setting("max_usd", float, "Stop once priced members' calls cost this many dollars; run again to go on.",
            {m: Derived("no cap") for m in MODES}, minimum=0),
    # -- the head search: its items, episodes and strategy
    Setting("tasks", str, f"Training mix; the recipe's matrix asks each member {MATRIX_K} replies an item, and "
            f"a task named without a count takes {TRAIN_PER_TASK} items there.",
            {RECIPE: ",".join(f"{t}:train:{TRAIN_PER_TASK}" for t in DEFAULT_TASKS.split(",")),
             SEARCH: "gsm8k:train,arc-challenge:train,mbpp:train"}),
    Setting("budget", int, "Training episodes to spend (at least one generation; 0 with --init-labels: the "
            "validated start is the head).", {RECIPE: 2000, SEARCH: 2000}, minimum=0),
    Setting("minibatch", int, "Training items every candidate plays each generation.",
            {RECIPE: Derived("every training item"), SEARCH: 8}, minimum=1),
    Setting("popsize", int, "Candidates per generation.",
            {RECIPE: 8, SEARCH: Derived("4 + 3 ln n"), READER: 16}, minimum=2),
    Setting("sigma0", float, "Initial CMA-ES step size (above 0).", {RECIPE: 3.0, SEARCH: 1.0, READER: 0.5}),
    Setting("max_turns", int, "Turn budget per episode.", {RECIPE: 4, SEARCH: 3}, minimum=1),
    Setting("val_tasks", str, "Validation mix.", {m: Derived("the val split of each training task") for m in PLAYS}),
    Setting("val_size", int, "Validation items in all, over the training tasks (without --val-tasks).",
            {RECIPE: MIN_VAL, SEARCH: 16}, minimum=1),
    Setting("val_every", int, "Validate the search's mean every K generations.", {RECIPE: 1, SEARCH: 2},
            minimum=1),
    Setting("cost_weight", float, "Fitness penalty per unit of cost.", {RECIPE: 0.05, SEARCH: 0.0, READER: 0.05},
            minimum=0),
    Setting("cost_unit", str, "Cost unit: tokens (per 1K tokens) or usd.", {RECIPE: "tokens", SEARCH: "tokens"},
            choices=("tokens", "usd")),
    Setting("decisions", str, "How candidates decide in training and validation episodes: sampled, or greedy (the "
            "most likely model and role, as ask plays a trained head).", {RECIPE: "greedy", SEARCH: "sampled"},
            choices=("sampled", "greedy")),
    Setting("init_labels", str, "Start the search from a head fitted to this sample matrix of the training items "
            "(trinity matrix --split train --out FILE) instead of zero.",
            {RECIPE: Derived("the recipe's own matrix"), SEARCH: None}),
    Setting("init_rotate", "toggle", "With --init-labels: the start asks the member the matrix favours, then the "
            "others in pool order until one agrees, as agree does (wants --input-dims 0).",
            {RECIPE: True, SEARCH: False}),
    Setting("center_items", int, "Centre the head's input on the turn-0 features of this many training tasks "
            "(0: do not).", {RECIPE: 256, SEARCH: 256}, minimum=0),
    Setting("input_dims", int, "Project the head's input on the top K principal directions of those features "
            "(0: read every hidden dimension).", {RECIPE: 0, SEARCH: 0}, minimum=0),
    Setting("backbone", str, "Coordinator backbone the head reads.",
            {RECIPE: "smollm2-135m", SEARCH: "smollm2-135m"}),
    Setting("svf", "toggle", "Also evolve singular-value offsets of backbone matrices.",
            {RECIPE: False, SEARCH: False}),
    Setting("svf_targets", list, "SVF matrix (repeatable).", {m: Derived("the default targets") for m in PLAYS},
            flags=("--svf-target",)),
    # -- the reader's search (--reader)
    Setting("train_matrix", str, "The training matrix file (trinity matrix --split train --k 1 --out FILE).",
            {READER: Derived("made: 32 training items a task")}),
    Setting("val_matrix", str, "The validation matrix file (trinity matrix --split val --k 1 --out FILE).",
            {READER: Derived("made: 98 validation items a task")}),
    Setting("generations", int, "Generations of the reader's search.", {READER: 40}, minimum=1),
    Setting("reader_weights", str, "The weight groups the search moves, comma-separated, of priority, member, conf, "
            "low, capped_w, examples_w, margin (`all`: every one).", {READER: "conf,margin"}),
    Setting("reader_calls", int, "The most calls an episode may make (0: one a member; more asks fresh attempts "
            "round-robin, and the training matrix must hold them: --k 2).", {READER: 0}, minimum=0),
    # -- where episodes run, and what is shown
    Setting("device", str, "Coordinator device: auto, cpu, cuda or mps.", {RECIPE: "auto", SEARCH: "auto"}),
    Setting("parallel", int, "Episodes to play at once; results do not depend on it.",
            {m: Derived("the pool file's parallel, else 1") for m in PLAYS}, minimum=1),
    Setting("ray", str, "Play episodes on Ray actors: alone (or 'local'), a Ray instance started for this run; "
            "'auto', the cluster this machine joined; HOST:PORT, that head node. Needs the ray extra.",
            {m: Derived("off") for m in PLAYS}, flags=("--ray",), metavar="[ADDRESS]"),
    Setting("ray_workers", int, "With --ray: actors to start, one CPU each.",
            {m: Derived("one per node") for m in PLAYS}, minimum=1),
    Setting("as_json", bool, "Print the run (--search-only) or the verdict as JSON on stdout instead of the "
            "head's directory.", {m: False for m in MODES}, flags=("--json",)),
    Setting("quiet", bool, "Nothing on stderr but errors: no progress.", {m: False for m in MODES},
            flags=("--quiet", "-q")),
)
BY_NAME = {s.name: s for s in SETTINGS}


def defaults(mode: str) -> dict[str, Any]:
    """The options of `mode` and their defaults, those the mode works out (`Derived`) left out."""
    return {s.name: s.defaults[mode] for s in SETTINGS
            if mode in s.defaults and not isinstance(s.defaults[mode], Derived)}


def mode_of(values: Mapping[str, Any]) -> str:
    """The mode the values choose (module docstring)."""
    if values.get("reader"):
        return READER
    return SEARCH if values.get("search_only") or values.get("resume") else RECIPE


def given(values: Mapping[str, Any]) -> list[str]:
    """The options `values` set: not None, and flags that are on."""
    return [name for name, value in values.items()
            if value is not None and not (BY_NAME[name].kind is bool and value is False)]


@dataclass(frozen=True)
class Resolved:
    """What `trinity evolve` was asked: its mode, every option of that mode with its value
    (the user's, else the mode's default; a `Derived` default is left as None for the mode to
    work out) and the names the user set."""

    mode: str
    values: dict[str, Any]
    given: tuple[str, ...]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]


def resolve(values: Mapping[str, Any]) -> Resolved:
    """The mode and values of `values` (option name -> the user's value, None where not
    given): options of another mode and values their checks refuse raise ConfigError."""
    unknown = sorted(set(values) - set(BY_NAME))
    if unknown:
        raise ConfigError(f"evolve has no option {unknown[0]!r}")
    mode = mode_of(values)
    typed = given(values)
    if values.get("reader") and (values.get("search_only") or values.get("resume")):
        switch = "search_only" if values.get("search_only") else "resume"
        raise ConfigError(f"{option('reader')} and {option(switch)} choose different runs", "give one of them")
    for name in typed:
        setting = BY_NAME[name]
        if mode not in setting.defaults:
            where = " and ".join(MODE_FLAGS[m] for m in setting.modes)
            hint = (f"add {option('reader')}, or leave {option(name)} out" if setting.modes == (READER,)
                    else f"leave {option(name)} out")
            raise ConfigError(f"{option(name)} is an option of {where.replace(' (no mode flag)', '')}", hint)
        setting.check(values[name])
    out = {}
    for setting in SETTINGS:
        if mode in setting.defaults:
            default = setting.defaults[mode]
            chosen = values.get(setting.name) if setting.name in typed else default
            out[setting.name] = None if isinstance(chosen, Derived) else chosen
    return Resolved(mode, out, tuple(typed))


def markdown() -> str:
    """docs/commands.md's table of the options: flag, each mode's default, what it does."""
    head = "| option | " + " | ".join(HEADINGS[m] for m in MODES) + " | what it does |"
    lines = [head, "|" + "---|" * (len(MODES) + 2)]
    for s in SETTINGS:
        cells = [f"`{s.shown(m)}`" if m in s.defaults and not isinstance(s.defaults[m], Derived)
                 else (s.shown(m) if m in s.defaults else "—") for m in MODES]
        flag = s.flag if s.kind not in ("toggle",) else f"{s.flag}/--no-{s.flag[2:]}"
        lines.append(f"| `{flag}` | " + " | ".join(cells) + f" | {s.doc} |")
    return "\n".join(lines)
