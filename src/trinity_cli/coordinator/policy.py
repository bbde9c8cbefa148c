"""The coordinator policy: transcript -> text -> hidden state -> head -> (model, role).

Input text (version `COORDINATOR_VERSION`): a short dispatcher instruction, the task, and
the conversation as plain `role (model): content` lines (no chat template: it hurt role
accuracy in the paper's code), ending with the line `Next:`. The feature is the
backbone's last-layer hidden state at the penultimate token of that text, scaled to
unit L2 norm before the head reads it.

Hidden states are cached on disk (`cache/hidden/`), keyed by sha256 of
`backbone fingerprint | COORDINATOR_VERSION | max_tokens | sha256(SVF offsets) | text`,
so candidates and turns that share a transcript never recompute it.

An all-zero head (the untrained default) gives uniform choices whatever the input, so
the backbone is not even loaded for it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from trinity_cli import paths
from trinity_cli.coordinator import head as head_mod
from trinity_cli.coordinator.head import Head
from trinity_cli.errors import ConfigError
from trinity_cli.messages import ROLES, ChatMessage, Decision, Turn

COORDINATOR_VERSION = "c1"
INSTRUCTION = (
    "You coordinate a team of language models. Read the task and the conversation so far, "
    "then decide which model acts next and in which role: thinker (plans or critiques), "
    "worker (solves) or verifier (checks the latest answer)."
)
TASK_CHARS = 2000
TURN_CHARS = 600
TEXT_CHARS = 6000


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + " …"


def coordinator_text(task: str, turns: Sequence[Turn], context: Sequence[ChatMessage] = ()) -> str:
    """The text the backbone reads (see module docstring); oldest turns go first when long."""
    head = [INSTRUCTION]
    if context:
        head.append("Earlier: " + _one_line(" ".join(f"{m.role}: {m.content}" for m in context), TURN_CHARS))
    head.append("Task: " + _one_line(task, TASK_CHARS))
    lines = [f"{t.role.value} ({t.model}): {_one_line(t.reply, TURN_CHARS)}" for t in turns]
    budget = TEXT_CHARS - sum(len(x) + 1 for x in head)
    while lines and sum(len(x) + 1 for x in lines) > budget:
        lines.pop(0)
    return "\n".join([*head, *lines, "Next:"])


def _softmax(logits: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    z = logits.astype(np.float64).copy()
    if mask is not None:
        z[~mask] = -np.inf
    z -= np.max(z)
    e = np.exp(z)
    return e / e.sum()


class Coordinator:
    """Chooses (model, role) each turn from the transcript.

    `backbone_ref` defaults to the head's own backbone. Loading the backbone (torch,
    transformers) is deferred until a non-zero head first needs a feature.
    """

    def __init__(
        self,
        head: Head,
        backbone_ref: str | None = None,
        device: str = "auto",
        svf_targets: Sequence[str] | None = None,
        use_cache: bool = True,
    ) -> None:
        self.head = head
        self.backbone_ref = backbone_ref or head.manifest["backbone"]["ref"]
        self.device = device
        self.svf_targets = list(svf_targets or (head.manifest.get("svf") or {}).get("targets", []))
        self.use_cache = use_cache
        self._backbone: Any = None
        self._svf: Any = None
        self._cache: Any = None
        self.encode_calls = 0
        self.cache_hits = 0

    @property
    def models(self) -> list[str]:
        return self.head.models

    @property
    def backbone(self) -> Any:
        if self._backbone is None:
            from trinity_cli.coordinator import backbone as backbone_mod

            self._backbone = backbone_mod.load(self.backbone_ref, device=self.device)
            self.head.check(self.head.manifest["pool"]["name"], self.models, self._backbone.fingerprint)
            if self._backbone.hidden_size != self.head.hidden_size:
                raise ConfigError(
                    f"head has hidden size {self.head.hidden_size}, backbone {self.backbone_ref!r} has "
                    f"{self._backbone.hidden_size}",
                    "use the backbone the head was made for",
                )
        return self._backbone

    @property
    def svf(self) -> Any:
        """The SVF over `svf_targets` of the loaded backbone, or None without targets."""
        if self._svf is None and self.svf_targets and not self.backbone_ref.startswith("hash:"):
            from trinity_cli.coordinator.svf import SVF

            self._svf = SVF(self.backbone, self.svf_targets)
        return self._svf

    def set_head(self, head: Head) -> None:
        """Swap in new parameters of the same layout (used by evolution)."""
        self.head = head

    def _cache_key(self, text: str) -> str:
        svf = hashlib.sha256(self.head.svf_offsets.astype(np.float32).tobytes()).hexdigest()[:16]
        raw = f"{self.backbone.fingerprint}|{COORDINATOR_VERSION}|{self.backbone.max_tokens}|{svf}|{text}"
        return "h1:" + hashlib.sha256(raw.encode()).hexdigest()

    def features(self, text: str) -> np.ndarray:
        backbone = self.backbone
        key = None
        if self.use_cache:
            if self._cache is None:
                import diskcache

                self._cache = diskcache.Cache(str(paths.cache_dir("hidden")), size_limit=2 << 30)
            key = self._cache_key(text)
            hit = self._cache.get(key)
            if hit is not None:
                self.cache_hits += 1
                return np.frombuffer(hit, dtype=np.float32).copy()
        if self.svf is not None:
            self.svf.apply(self.head.svf_offsets)
        vector = backbone.encode(text)
        self.encode_calls += 1
        if key is not None:
            self._cache.set(key, vector.astype(np.float32).tobytes())
        return vector

    def decide(
        self,
        task: str,
        turns: Sequence[Turn],
        rng: np.random.Generator,
        excluded: Collection[str] = (),
        context: Sequence[ChatMessage] = (),
        greedy: bool = False,
    ) -> Decision:
        start = time.perf_counter()
        mask = np.array([m not in excluded for m in self.models])
        if not mask.any():
            raise ConfigError("every model of the pool is excluded", "exclude fewer models")
        if self.head.is_zero:
            model_logits, role_logits = np.zeros(len(self.models)), np.zeros(len(ROLES))
        else:
            feature = self.features(coordinator_text(task, turns, context))
            # Unit L2 norm, so a head weight of scale s gives logits of scale s whatever
            # the backbone's activation magnitudes (this is what sigma0 is relative to).
            feature = feature / (float(np.linalg.norm(feature)) + 1e-8)
            model_logits, role_logits = self.head.logits(feature)
        p_model = _softmax(model_logits, mask)
        p_role = _softmax(role_logits)
        if greedy:
            mi, ri = int(np.argmax(p_model)), int(np.argmax(p_role))
        else:
            mi, ri = int(rng.choice(len(p_model), p=p_model)), int(rng.choice(len(p_role), p=p_role))
        return Decision(
            model=self.models[mi],
            role=ROLES[ri],
            model_probs=[float(p) for p in p_model],
            role_probs=[float(p) for p in p_role],
            seconds=time.perf_counter() - start,
        )

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()


DEFAULT_HEAD = "default"


def resolve_head(ref: str | None, pool_name: str, models: list[str], backbone_ref: str | None = None) -> Head:
    """The head to use: `ref` (a name, a directory or 'untrained'); None means the shipped
    default head when it was made for this pool, else the untrained one."""
    from trinity_cli.coordinator.backbone import DEFAULT_BACKBONE, hidden_size_of

    if ref is None:
        heads = head_mod.available_heads()
        if DEFAULT_HEAD in heads:
            candidate = Head.load(heads[DEFAULT_HEAD])
            if candidate.models == models and candidate.manifest["pool"].get("name") == pool_name:
                return candidate
        ref = "untrained"
    if ref == "untrained":
        # An all-zero head never reads the backbone, so it is not pinned to one.
        bref = backbone_ref or DEFAULT_BACKBONE
        hidden_size = hidden_size_of(bref)
        info = {"ref": bref, "fingerprint": None, "hidden_size": hidden_size}
        return head_mod.untrained(pool_name, models, info, hidden_size)
    head = Head.load(head_mod.find_head(ref))
    head.check(pool_name, models)
    return head
