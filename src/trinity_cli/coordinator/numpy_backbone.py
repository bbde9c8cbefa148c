"""The coordinator's backbone on the CPU without torch: the same decoder in numpy.

`NumpyBackbone.encode(text)` returns what `Backbone.encode` (coordinator/backbone.py) returns
— the last layer's hidden state after the final norm at the penultimate token, float32 of
shape (hidden_size,) — computed by a plain numpy forward pass over the same safetensors
weights and the same `tokenizer.json`, read block by block over kept prefixes exactly as
`Backbone` reads them (`PrefixReuse`). It exists because importing torch and transformers
takes seconds that a user's first decision would otherwise wait for (docs/measurements.md);
it is what `backbone.load` gives on the CPU when no SVF changes the weights.

Threads: numpy's OpenBLAS splits a product's sums between its threads on some CPUs (seen on
an AMD EPYC with numpy 2.4: `OPENBLAS_NUM_THREADS=1` changed the features), so `encode` asks
for one BLAS thread on the calling thread (`_one_blas_thread`, OpenBLAS's
`openblas_set_num_threads_local`) and puts the count back after: a feature is the same bits
whatever thread settings the process was given (tests/test_backbone_threads.py).

Agreement: the two engines sum in different orders, so their features agree to float
rounding, not bit for bit (tests/test_numpy_backbone.py bounds it); both share the
hidden-state cache key (policy.py), whose `dtype` is float32 for either. Within this engine a
text's feature is the same bits whether its prefix was kept or encoded now, as in `Backbone`.

Architectures: decoders of `model_type` llama (SmolLM2) with the default rotary embedding,
SiLU and no biases; anything else is `Unsupported` and loads through transformers instead
(qwen2 is left there on purpose: transformers rebuilds its tokenizer from its own class, not
from `tokenizer.json`, so the two engines could read different tokens).

Weight layout: the Hugging Face names (`model.layers.N.self_attn.q_proj.weight`, ...), read
from `model.safetensors` by memory map (safetensors' layout: an 8-byte little-endian header
length, a JSON header of name -> dtype, shape, data_offsets, then the data).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from trinity_cli.coordinator.encoding import PrefixReuse, Unsupported

WEIGHTS = "model.safetensors"


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as float32 numpy (memory-mapped where it is F32)."""
    with path.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + length)
    tensors = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        begin, end = spec["data_offsets"]
        raw = data[begin:end]
        kind = spec["dtype"]
        if kind == "F32":
            array = raw.view(np.float32)
        elif kind == "F16":
            array = raw.view(np.float16).astype(np.float32)
        elif kind == "BF16":
            array = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            raise Unsupported(f"{path.name}: tensor {name} has dtype {kind}")
        tensors[name] = array.reshape(spec["shape"])
    return tensors


def _openblas_local() -> Any:
    """OpenBLAS's `openblas_set_num_threads_local` in the library numpy loaded, or None
    (another BLAS, or an OpenBLAS without it)."""
    import ctypes
    import glob

    libs = Path(np.__file__).parent.parent / "numpy.libs"
    for path in sorted(glob.glob(str(libs / "lib*openblas*.so*"))):
        try:
            setter = ctypes.CDLL(path).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        setter.argtypes, setter.restype = [ctypes.c_int], ctypes.c_int
        return setter
    return None


_BLAS_LOCAL = _openblas_local()


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """One OpenBLAS thread for the calling thread within the block (module docstring)."""
    if _BLAS_LOCAL is None:
        yield
        return
    before = _BLAS_LOCAL(1)
    try:
        yield
    finally:
        _BLAS_LOCAL(before)


def _rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    variance = np.mean(x * x, axis=-1, keepdims=True)
    return weight * (x * (1.0 / np.sqrt(variance + np.float32(eps))))


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotary embedding of x (heads, tokens, head_dim), Hugging Face's half-split layout."""
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


class NumpyBackbone(PrefixReuse):
    """A converted model directory (config.json, tokenizer.json, model.safetensors) computed
    in numpy on the CPU; `ref`, `fingerprint`, `max_tokens` as `Backbone` has them."""

    device = "cpu"
    dtype = "float32"

    def __init__(self, ref: str, fingerprint: str, directory: Path, max_tokens: int = 1024) -> None:
        super().__init__()
        from tokenizers import Tokenizer

        self.ref = ref
        self.fingerprint = fingerprint
        self.max_tokens = max_tokens
        config = json.loads((directory / "config.json").read_text())
        self._check(config, directory)
        self.hidden_size = int(config["hidden_size"])
        self.n_heads = int(config["num_attention_heads"])
        self.n_kv = int(config.get("num_key_value_heads") or self.n_heads)
        self.head_dim = int(config.get("head_dim") or self.hidden_size // self.n_heads)
        self.eps = float(config["rms_norm_eps"])
        rope = config.get("rope_parameters") or {}
        theta = float(rope.get("rope_theta", config.get("rope_theta", 10000.0)))
        steps = np.arange(0, self.head_dim, 2, dtype=np.int64).astype(np.float32) / np.float32(self.head_dim)
        self.inv_freq = (1.0 / (np.float32(theta) ** steps)).astype(np.float32)
        w = read_safetensors(directory / WEIGHTS)
        self.embed = w["model.embed_tokens.weight"]
        self.norm = w["model.norm.weight"]
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"model.layers.{i}."
            attn = p + "self_attn."
            self.layers.append({
                "ln1": w[p + "input_layernorm.weight"], "ln2": w[p + "post_attention_layernorm.weight"],
                "q": w[attn + "q_proj.weight"], "k": w[attn + "k_proj.weight"], "v": w[attn + "v_proj.weight"],
                "o": w[attn + "o_proj.weight"],
                "gate": w[p + "mlp.gate_proj.weight"], "up": w[p + "mlp.up_proj.weight"],
                "down": w[p + "mlp.down_proj.weight"],
            })
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.no_padding()
        if max_tokens > 0:
            self.tokenizer.enable_truncation(max_tokens, direction="left")
        else:
            self.tokenizer.no_truncation()

    @staticmethod
    def _check(config: dict[str, Any], directory: Path) -> None:
        kind = config.get("model_type")
        rope = config.get("rope_parameters") or {"rope_type": "default"}
        if kind != "llama":
            raise Unsupported(f"model_type {kind!r}")
        if config.get("rope_scaling") or rope.get("rope_type", "default") != "default":
            raise Unsupported("a scaled rotary embedding")
        if config.get("hidden_act", "silu") != "silu" or config.get("mlp_bias") or config.get("attention_bias"):
            raise Unsupported("an activation or bias this engine does not compute")
        if not (directory / WEIGHTS).is_file() or not (directory / "tokenizer.json").is_file():
            raise Unsupported(f"no {WEIGHTS} and tokenizer.json in {directory}")

    # -- PrefixReuse's hooks: a cache is [per layer (keys, values)], each (kv heads, tokens, dim)
    def _new_cache(self) -> list[tuple[np.ndarray, np.ndarray]]:
        empty = np.zeros((self.n_kv, 0, self.head_dim), dtype=np.float32)
        return [(empty, empty) for _ in self.layers]

    @staticmethod
    def _cache_length(cache: list[tuple[np.ndarray, np.ndarray]]) -> int:
        return int(cache[0][0].shape[1])

    @staticmethod
    def _crop(cache: list[tuple[np.ndarray, np.ndarray]], length: int) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(k[:, :length], v[:, :length]) for k, v in cache]  # arrays are never written in place

    @staticmethod
    def _copy(cache: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[np.ndarray, np.ndarray]]:
        return cache  # nothing writes into a cache's arrays (a read grows new ones): sharing is copying

    def _tokens(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        enc = self.tokenizer.encode(text)
        return list(enc.ids), [(int(a), int(b)) for a, b in enc.offsets]

    def _forward(self, ids: list[int], cache: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, Any]:
        """Hidden states (tokens, hidden) after the final norm of `ids` read after `cache`'s
        tokens, and the cache grown by them."""
        past = self._cache_length(cache)
        t = len(ids)
        positions = np.arange(past, past + t, dtype=np.float32)
        freqs = positions[:, None] * self.inv_freq[None, :]
        angles = np.concatenate([freqs, freqs], axis=-1)
        cos, sin = np.cos(angles), np.sin(angles)
        # query i (position past + i) sees keys 0 .. past + i
        mask = np.triu(np.full((t, past + t), -np.inf, dtype=np.float32), k=past + 1)
        group = self.n_heads // self.n_kv
        scale = np.float32(1.0 / np.sqrt(self.head_dim))
        x = self.embed[np.asarray(ids)].astype(np.float32)
        grown = []
        for layer, (k_past, v_past) in zip(self.layers, cache, strict=True):
            h = _rms_norm(x, layer["ln1"], self.eps)
            q, k, v = h @ layer["q"].T, h @ layer["k"].T, h @ layer["v"].T
            q = _rotate(q.reshape(t, self.n_heads, self.head_dim).transpose(1, 0, 2), cos, sin)
            k = _rotate(k.reshape(t, self.n_kv, self.head_dim).transpose(1, 0, 2), cos, sin)
            v = v.reshape(t, self.n_kv, self.head_dim).transpose(1, 0, 2)
            keys = np.concatenate([k_past, k], axis=1)
            values = np.concatenate([v_past, v], axis=1)
            grown.append((keys, values))
            q = q.reshape(self.n_kv, group * t, self.head_dim)  # heads sharing a kv head, stacked
            scores = (q @ keys.transpose(0, 2, 1)).reshape(self.n_kv, group, t, past + t) * scale + mask
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = scores / scores.sum(axis=-1, keepdims=True)
            out = (probs.reshape(self.n_kv, group * t, past + t) @ values).reshape(self.n_heads, t, self.head_dim)
            x = x + out.transpose(1, 0, 2).reshape(t, self.n_heads * self.head_dim) @ layer["o"].T
            h = _rms_norm(x, layer["ln2"], self.eps)
            gate = h @ layer["gate"].T
            x = x + ((gate / (1.0 + np.exp(-gate))) * (h @ layer["up"].T)) @ layer["down"].T
        return _rms_norm(x, self.norm, self.eps), grown

    def encode(self, text: str) -> np.ndarray:
        """The feature of `text`, read block by block over a kept prefix, on one BLAS thread
        (module docstring)."""
        with _one_blas_thread():
            return self._encode(text)

    def _encode(self, text: str) -> np.ndarray:
        ids, offsets = self._tokens(text)
        cache, done, starts = self._take_prefix(text, ids, offsets)
        hidden = None
        for begin, end in zip(starts, starts[1:], strict=False):
            if end <= done:
                continue
            hidden, cache = self._forward(ids[begin:end], cache)
        assert hidden is not None
        self._keep(ids, cache, done)
        position = -2 if len(ids) >= 2 else -1
        return np.asarray(hidden[position], dtype=np.float32).copy()

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` before any clipping (as `Backbone.count_tokens` counts them)."""
        if self.max_tokens <= 0:
            return len(self.tokenizer.encode(text).ids)
        self.tokenizer.no_truncation()
        try:
            return len(self.tokenizer.encode(text).ids)
        finally:
            self.tokenizer.enable_truncation(self.max_tokens, direction="left")
