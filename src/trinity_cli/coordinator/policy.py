"""The coordinator policy: transcript -> text -> hidden state -> head -> (model, role).

Input text (version `COORDINATOR_VERSION`): coordinator/text.py. The feature is the
backbone's last-layer hidden state at the penultimate token of that text, scaled to
unit L2 norm before the head reads it (and centres it: coordinator/head.py).

Hidden states are cached on disk (`cache/hidden/`), keyed by
"h2:" + sha256(canonical JSON of {backbone fingerprint, dtype, COORDINATOR_VERSION,
max_tokens, SVF target names, sha256(SVF offsets), text}), so candidates and turns that
share a transcript never recompute it. Value: {"request": that payload, "vector": the
float32 feature's bytes} (the request kept so a recording can carry it: recordings/; older
entries hold the bytes alone). In replay-only mode (`paths.replay_only()`) a feature the
cache does not hold raises `NotRecorded` instead of running the backbone.

Heads record the prompt and coordinator versions they were evolved under (`versions()`);
a trained head of other versions is refused, or, when it is the shipped default picked
implicitly, skipped for the untrained head with a warning that says why.

An all-zero head (the untrained default) gives uniform choices whatever the input, so
the backbone is not even loaded for it.

Concurrency: `Coordinator.view(head)` gives another coordinator with its own head that
shares this one's backbone, SVF and hidden-state cache, so concurrent episodes can each
route with their own head. Computing a feature (applying the head's SVF offsets to the
backbone, then encoding) runs under one lock shared by all views, so a feature is always
computed with its own head's offsets: exact, whatever the number of threads. Cache reads
run outside the lock; a miss is looked up again under it, so a text several views ask for
at once is encoded once.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

# prompts only holds prompt text (it imports messages alone): read for PROMPT_VERSION.
from trinity_cli import paths
from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.coordinator import head as head_mod
from trinity_cli.coordinator import reader as reader_mod
from trinity_cli.coordinator.head import Head
from trinity_cli.coordinator.reader import Reader
from trinity_cli.coordinator.text import candidate_texts, coordinator_text
from trinity_cli.errors import AssetError, ConfigError, HeadMismatch, NotRecorded
from trinity_cli.keyed_cache import KeyedCache, content_key
from trinity_cli.messages import ROLES, ChatMessage, Decision, Turn
from trinity_cli.turns import prompts
from trinity_cli.turns.source_rules import SourceRules

log = logging.getLogger(__name__)

COORDINATOR_VERSION = "c2"
HIDDEN_TAG = "h2:"  # the hidden-state cache's key tag
def versions() -> dict[str, str]:
    """Head manifest keys -> the versions this code runs: a trained head must match them."""
    return {"prompt_version": prompts.PROMPT_VERSION, "coordinator_version": COORDINATOR_VERSION}


def _softmax(logits: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    z = logits.astype(np.float64).copy()
    if mask is not None:
        z[~mask] = -np.inf
    z -= np.max(z)
    e = np.exp(z)
    return e / e.sum()


class _Shared:
    """What every view of one coordinator shares: the loaded backbone, its SVF, the
    hidden-state cache, their lock and the feature counters."""

    def __init__(self) -> None:
        self.backbone: Any = None
        self.identity: tuple[str, str, int] | None = None  # Coordinator._identity, before a load
        self.svf: Any = None
        self.cache: Any = None
        self.lock = threading.RLock()
        self.encode_calls = 0
        self.cache_hits = 0


class Coordinator(SourceRules):
    """Chooses (model, role) each turn from the transcript.

    `backbone_ref` defaults to the head's own backbone. Loading the backbone (backbone.load:
    numpy on the CPU, else torch and transformers) is deferred until a non-zero head first needs
    a feature the hidden-state cache does not hold.

    Its endings (turns/source_rules.py): on a code task the episode ends at the first code that
    passes the task's shown examples (rule 5, turns/source_rules.py); otherwise plurality.
    """

    stop_when_agreed = False
    stop_when_checks_settle = True  # rule 5 (turns/source_rules.py)

    def __init__(
        self,
        head: Head,
        backbone_ref: str | None = None,
        device: str = "auto",
        svf_targets: Sequence[str] | None = None,
        use_cache: bool = True,
        max_tokens: int = 1024,
        _shared: _Shared | None = None,
    ) -> None:
        self.head = head
        self.max_tokens = max_tokens  # the backbone's token limit (hash backbones have none)
        self.backbone_ref = backbone_ref or head.manifest["backbone"]["ref"]
        self.device = device
        self.svf_targets = list(svf_targets or (head.manifest.get("svf") or {}).get("targets", []))
        self.use_cache = use_cache
        self._owner = _shared is None  # a view leaves closing to the coordinator it came from
        self._shared = _shared or _Shared()
        self._checked = False

    def view(self, head: Head) -> Coordinator:
        """A coordinator routing with `head` (same layout) that shares this one's backbone,
        SVF and hidden-state cache; safe to use from another thread (module docstring)."""
        return Coordinator(head, backbone_ref=self.backbone_ref, device=self.device,
                           svf_targets=self.svf_targets, use_cache=self.use_cache, max_tokens=self.max_tokens,
                           _shared=self._shared)

    @property
    def models(self) -> list[str]:
        return self.head.models

    @property
    def encode_calls(self) -> int:
        """Texts the backbone encoded, over this coordinator and all its views."""
        return self._shared.encode_calls

    @property
    def cache_hits(self) -> int:
        """Features read from the hidden-state cache, over this coordinator and all its views."""
        return self._shared.cache_hits

    @property
    def backbone(self) -> Any:
        shared = self._shared
        if shared.backbone is None:
            with shared.lock:
                if shared.backbone is None:
                    from trinity_cli.coordinator import backbone as backbone_mod

                    shared.backbone = backbone_mod.load(self.backbone_ref, device=self.device,
                                                        max_tokens=self.max_tokens, svf=bool(self.svf_targets))
        if not self._checked:
            loaded = shared.backbone
            self.head.check(self.head.manifest["pool"]["name"], self.models, loaded.fingerprint, versions())
            if loaded.hidden_size != self.head.hidden_size:
                raise ConfigError(
                    f"head has hidden size {self.head.hidden_size}, backbone {self.backbone_ref!r} has "
                    f"{loaded.hidden_size}",
                    "use the backbone the head was made for",
                )
            self._checked = True
        return shared.backbone

    @property
    def svf(self) -> Any:
        """The SVF over `svf_targets` of the loaded backbone, or None without targets."""
        shared = self._shared
        if shared.svf is None and self.svf_targets and not self.backbone_ref.startswith("hash:"):
            with shared.lock:
                if shared.svf is None:
                    from trinity_cli.coordinator.svf import SVF

                    shared.svf = SVF(self.backbone, self.svf_targets)
        return shared.svf

    def _short(self, text: str) -> bool:
        """Whether `text` fits without counting: every token covers at least one UTF-8 byte,
        and a tokenizer adds a few special tokens at most."""
        return len(text.encode()) + 8 <= self.max_tokens

    def fits(self, text: str) -> bool:
        """Whether the backbone reads `text` whole (it clips longer texts from the left)."""
        if self._short(text):
            return True
        backbone = self.backbone
        if backbone.max_tokens <= 0:
            return True
        # A tokenizer is not safe to call from several threads at once (views share it).
        with self._shared.lock:
            return bool(backbone.count_tokens(text) <= backbone.max_tokens)

    def _cache_key(self, text: str) -> str:
        """The hidden-state cache key of `text` (see module docstring)."""
        return content_key(HIDDEN_TAG, self._cache_request(text))

    def _identity(self) -> tuple[str, str, int]:
        """(fingerprint, dtype, token limit) of the backbone, as its hidden-state cache keys hold
        them, known without loading it where that can be: a GGUF or Hugging Face backbone's
        fingerprint is read off its file or reference (backbone_refs.describe), its dtype off
        the device (float32 on CPU); the head is checked against them as a loaded backbone
        checks it. A hash backbone costs nothing to load, so it is loaded."""
        shared = self._shared
        if shared.backbone is not None or self.backbone_ref.startswith("hash:"):
            backbone = self.backbone
            return backbone.fingerprint, backbone.dtype, backbone.max_tokens
        if shared.identity is None:
            with shared.lock:
                if shared.identity is None:
                    from trinity_cli.coordinator.backbone import pick_device
                    from trinity_cli.coordinator.backbone_refs import describe

                    try:
                        fingerprint = describe(self.backbone_ref)[0]
                    except AssetError:  # as a load would say it: let the load say it
                        backbone = self.backbone
                        return backbone.fingerprint, backbone.dtype, backbone.max_tokens
                    dtype = "float32" if pick_device(self.device) == "cpu" else "float16"
                    shared.identity = (fingerprint, dtype, self.max_tokens)
        if not self._checked:
            self.head.check(self.head.manifest["pool"]["name"], self.models, shared.identity[0], versions())
        return shared.identity

    def _cache_request(self, text: str) -> dict[str, Any]:
        """The payload the hidden-state cache key of `text` hashes (see module docstring)."""
        fingerprint, dtype, max_tokens = self._identity()
        return {
            "backbone": fingerprint,
            "dtype": dtype,
            "coordinator": COORDINATOR_VERSION,
            "max_tokens": max_tokens,
            "svf_targets": self.svf_targets,
            "svf": hashlib.sha256(self.head.svf_offsets.astype(np.float32).tobytes()).hexdigest(),
            "text": text,
        }

    def _hidden_cache(self) -> Any:
        shared = self._shared
        if shared.cache is None:
            with shared.lock:
                if shared.cache is None:
                    shared.cache = KeyedCache(paths.cache_dir("hidden"), "hidden-state cache", size_limit=2 << 30,
                                              journaled=True)
        return shared.cache

    def _cached(self, cache: Any, key: str) -> np.ndarray | None:
        hit = cache.get(key)
        if hit is None:
            return None
        with self._shared.lock:
            self._shared.cache_hits += 1
        vector = hit["vector"] if isinstance(hit, dict) else hit
        return np.frombuffer(vector, dtype=np.float32).copy()

    def _recorded(self, text: str) -> bool:
        """Whether the hidden-state cache holds the feature of `text` (no backbone loaded)."""
        return self.use_cache and self._hidden_cache().get(self._cache_key(text)) is not None

    def features(self, text: str) -> np.ndarray:
        """The backbone's feature of `text`: from the hidden-state cache when it holds it (the
        backbone is then not loaded), else encoded and cached."""
        shared = self._shared
        cache: Any = None
        key: str | None = None
        request: dict[str, Any] = {}
        if self.use_cache:
            cache = self._hidden_cache()
            request = self._cache_request(text)
            key = content_key(HIDDEN_TAG, request)
            found = self._cached(cache, key)
            if found is not None:
                return found
        with shared.lock:
            if key is not None:  # another view may have encoded it while this one waited
                found = self._cached(cache, key)
                if found is not None:
                    return found
            if paths.replay_only():
                raise NotRecorded(
                    f"replay-only: the coordinator's hidden state for this decision is not recorded "
                    f"({len(text):,} characters of transcript, ending {' '.join(text[-60:].split())!r})",
                    "import a recording that holds it (trinity recordings import PATH), or run without "
                    "--replay-only to run the backbone",
                )
            backbone = self.backbone
            # The backbone's weights depend on the head's SVF offsets: set and encode together.
            if self.svf is not None:
                self.svf.apply(self.head.svf_offsets)
            vector = backbone.encode(text)
            shared.encode_calls += 1
            if key is not None:
                cache.set(key, {"request": request, "vector": vector.astype(np.float32).tobytes()})
        return vector

    def state_feature(self, task: str, turns: Sequence[Turn] = (), context: Sequence[ChatMessage] = ()) -> np.ndarray:
        """What the head reads for this conversation state, before its centre: the backbone
        feature of the state's coordinator text, scaled to unit L2 norm."""
        feature = self.features(self._text(task, turns, context))
        # Unit L2 norm, so a head weight of scale s gives logits of scale s whatever
        # the backbone's activation magnitudes (this is what sigma0 is relative to).
        return feature / (float(np.linalg.norm(feature)) + 1e-8)

    def _text(self, task: str, turns: Sequence[Turn], context: Sequence[ChatMessage]) -> str:
        """`coordinator_text` of this state, found without the backbone when a recorded
        feature settles it: the first candidate, when recorded, fits (it was encoded); in
        replay-only mode the first recorded candidate is the one the recording chose, since
        a candidate is only ever encoded when every one before it did not fit."""
        texts = candidate_texts(task, turns, context)
        if self._short(texts[0]):
            return texts[0]
        if self.use_cache and self._shared.backbone is None:
            if self._recorded(texts[0]):
                return texts[0]
            if paths.replay_only():
                return next((text for text in texts if self._recorded(text)), texts[0])
        return coordinator_text(task, turns, context, fits=self.fits)

    def decide(
        self,
        task: str,
        turns: Sequence[Turn],
        rng: np.random.Generator,
        excluded: Collection[str] = (),
        context: Sequence[ChatMessage] = (),
        greedy: bool = False,
        kind: AnswerKind | None = None,
    ) -> Decision:
        start = time.perf_counter()
        mask = np.array([m not in excluded for m in self.models])
        if not mask.any():
            raise ConfigError("every model of the pool is excluded", "exclude fewer models")
        if self.head.is_zero:
            model_logits, role_logits = np.zeros(len(self.models)), np.zeros(len(ROLES))
        else:
            model_logits, role_logits = self.head.logits(self.state_feature(task, turns, context))
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

    @property
    def loads_backbone(self) -> bool:
        """Whether its decisions read a backbone (a learned head's do; an untrained one's are uniform)."""
        return self.head.learned and self.backbone_ref is not None

    def warm(self) -> None:
        """Load now what the first decision would load (`loads_backbone`), so a server pays
        for it at start, not on its first request."""
        if self.loads_backbone:
            _ = self.backbone

    def close(self) -> None:
        """Close the hidden-state cache (a view leaves it to the coordinator it came from)."""
        if self._owner and self._shared.cache is not None:
            self._shared.cache.close()

    def __enter__(self) -> Coordinator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


DEFAULT_HEAD = "default"


def resolve_head(ref: str | None, pool_name: str, models: list[str],
                 backbone_ref: str | None = None) -> Head | Reader:
    """The head to use: `ref` (a name, a directory or 'untrained'); None means the head named
    `default` (shipped, or the user's) when it was made for this pool, else the untrained one.
    A head directory may hold a reader (coordinator/reader.py), checked against the pool alone
    (the shipped default is one). A trained
    head is checked here, before anything runs, against the pool, the versions and the
    backbone it will read (`backbone_ref`, else its own: the file's fingerprint, not the
    model)."""
    from trinity_cli.coordinator.backbone_refs import DEFAULT_BACKBONE, describe, hidden_size_of

    if ref is None:
        heads = head_mod.available_heads()
        if DEFAULT_HEAD in heads and reader_mod.is_reader(heads[DEFAULT_HEAD]):
            default = reader_mod.load(heads[DEFAULT_HEAD])
            # A reader made for another pool is not this pool's default (as a head's is not).
            if default.models == models and default.pool == pool_name:
                return default
        elif DEFAULT_HEAD in heads:
            candidate = Head.load(heads[DEFAULT_HEAD])
            if candidate.models == models and candidate.manifest["pool"].get("name") == pool_name:
                stale = candidate.stale_versions(versions())
                if not stale:
                    reads = describe(backbone_ref or candidate.manifest["backbone"]["ref"])[0]
                    try:
                        candidate.check(pool_name, models, reads)
                        return candidate
                    except HeadMismatch as exc:
                        stale = exc.message
                # Picked implicitly: fall back rather than refuse, but say why.
                log.warning("not using head %r: %s; using the untrained head (evolve a new one with "
                            "trinity evolve)", DEFAULT_HEAD, stale)
        ref = "untrained"
    if ref == "untrained":
        # An all-zero head never reads the backbone, so it is not pinned to one.
        bref = backbone_ref or DEFAULT_BACKBONE
        hidden = hidden_size_of(bref)
        info = {"ref": bref, "fingerprint": None, "hidden_size": hidden}
        return head_mod.untrained(pool_name, models, info, hidden)
    where = head_mod.find_head(ref)
    if reader_mod.is_reader(where):
        reader = reader_mod.load(where)
        reader.check(pool_name, models)
        return reader
    head = Head.load(where)
    head.check(pool_name, models, describe(backbone_ref or head.manifest["backbone"]["ref"])[0], versions=versions())
    return head
