"""What every pool member's entry is made of: the fields all kinds share (`MemberBase`) and the
blocks kinds use (`Weights`, `Price`). Each kind's own schema subclasses `MemberBase` beside
its backend (backends/: `GGUFModel` in gguf_file.py, `OpenAIModel` in openai_api.py,
`ScriptedModel` in scripted.py, a package's in its own module); pool_config.py checks every
member against the schema of its kind. Field names follow llama.cpp's; unknown keys are errors.

What a kind declares on its schema, besides its fields:

    kind          Literal["<the kind's name>"]
    load_key()    members with equal keys share one backend (default: each its own)
    sized_to(n)   the member as it runs on n cores (default: as it is; GGUF sets n_threads)
    runs_locally  it computes on this machine's cores (a local Ray instance sizes its actors)
    answers_at_once  its replies cost no model time (scripted rules: cost forecasts count 0 s)
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class Strict(BaseModel):
    """A block of the pool file: unknown keys are errors, values never change once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PackageFile(Strict):
    """A file inside an installed Python distribution, found without importing it."""

    package: str
    path: str


class SplitFile(Strict):
    """One file split across several distributions: `parts` concatenated in order must be
    `size` bytes with the given `sha256`. Assembled once into the cache."""

    parts: list[PackageFile] = Field(min_length=1)
    filename: str
    size: int = Field(gt=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class HFFile(Strict):
    """A file already in the local Hugging Face hub cache (never downloaded)."""

    repo: str
    file: str
    revision: str | None = None


class Weights(Strict):
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


class Price(Strict):
    """US dollars per 1,000 tokens."""

    input_per_1k: float = Field(default=0.0, ge=0)
    output_per_1k: float = Field(default=0.0, ge=0)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_1k + completion_tokens * self.output_per_1k) / 1000


STYLES = ("reason", "direct", "program")
Style = Literal["reason", "direct", "program"]


RoleName = Literal["thinker", "worker", "verifier"]


class MemberBase(Strict):
    """The fields every member has, whatever its kind (module docstring)."""

    kind: str  # each kind's schema narrows it to its name
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
    #: Its replies cost no model time (cost forecasts count 0 s a token for it).
    answers_at_once: ClassVar[bool] = False

    def load_key(self) -> str:
        """Members with equal keys share one backend (pool/pool.py); by default each has its own."""
        return f"{self.kind}:{self.name}"

    def sized_to(self, cpus: int) -> MemberBase:
        """This member as it runs given `cpus` cores (a Ray actor's share); by default unchanged."""
        return self
