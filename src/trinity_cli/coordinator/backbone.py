"""The coordinator's backbone: a small causal LM read by transformers (torch lives here), and
`load`, which picks the engine: on the CPU with weights no SVF changes, the same decoder in
numpy (coordinator/numpy_backbone.py), which imports no torch.

`Backbone.encode(text)` returns the last layer's hidden state (after the final norm)
at the penultimate token of `text`, as float32 numpy of shape (hidden_size,).

Incremental encoding (kept prefixes, shared with the numpy engine): coordinator/encoding.py.

References (`--backbone`) and fingerprints: coordinator/backbone_refs.py. transformers
de-quantises a GGUF on load, which is slow (docs/measurements.md), so the first load saves the model in
safetensors under `cache/backbones/<sha256[:16]>/` and later loads read that.

Device: `auto` picks CUDA, then MPS, then CPU; `cpu`, `cuda`, `mps` force one. Weights are
float32 on CPU and float16 elsewhere (`Backbone.dtype`).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from trinity_cli import paths
from trinity_cli.coordinator.backbone_refs import DEFAULT_BACKBONE, describe, hash_backbone
from trinity_cli.coordinator.encoding import PrefixReuse, Unsupported
from trinity_cli.errors import AssetError, ConfigError, option

log = logging.getLogger(__name__)

T = TypeVar("T")


def _accelerator_possible() -> bool:
    """Whether this machine could give torch a GPU, judged without importing torch (seconds):
    Apple silicon (MPS), or a torch built for CUDA or ROCm on a machine with its driver's
    devices (Windows: a CUDA build is enough). False means `auto` is the CPU."""
    import importlib.util
    import platform
    import re

    if platform.system() == "Darwin":
        return platform.machine() == "arm64"
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    version = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        text = version.read_text()
    except OSError:
        return True  # an unusual install: let torch say

    def built_for(name: str) -> bool:  # `cuda: Optional[str] = '12.4'`, not `= None`
        found = re.search(rf"^{name}\b.*=\s*(None|['\"][^'\"]+['\"])", text, re.M)
        return found is not None and found.group(1) != "None"

    cuda, hip = built_for("cuda"), built_for("hip")
    if os.name == "nt":
        return cuda
    return (cuda and any(Path(d).exists() for d in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"))) or (
        hip and Path("/dev/kfd").exists())


def pick_device(device: str = "auto") -> str:
    """The device `device` names: `auto` picks CUDA, then MPS, then CPU (the CPU without
    importing torch where no accelerator could be there)."""
    if device == "auto" and not _accelerator_possible():
        return "cpu"
    import torch

    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if device not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"unknown device {device!r}", "use auto, cpu, cuda or mps")
    return device


def limit_threads(n: int) -> None:
    """Compute with at most `n` CPU threads in this process: OpenMP's and the BLAS
    libraries' pools, for libraries loaded after this call (llama.cpp members). Not torch:
    the backbone always computes on `TORCH_THREADS` (below)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)


# The CPU threads torch computes features with, in every process. A short pass (one line of
# a transcript) splits its sums between threads, so with two threads a feature's last bits
# depend on how many threads torch, MKL and OpenMP each ended up with, which follows the
# environment at import (OMP_NUM_THREADS, which Ray sets for its workers) as much as
# set_num_threads: four settings of one machine gave three different features
# (tests/test_backbone_threads.py). On one thread nothing is split: the same bits in the
# command's process, on a Ray actor and on a `--parallel` thread. What it costs per decision,
# and beside the members' calls, is measured in docs/measurements.md ("The coordinator on one
# thread").
TORCH_THREADS = 1


def load(ref: str, device: str = "auto", max_tokens: int = 1024, svf: bool = False):  # noqa: ANN201
    """A loaded backbone for `ref`: `HashBackbone` for hash:DIM; on the CPU, with weights no
    SVF changes (`svf` False), a GGUF (converted once) or model directory the numpy engine
    computes: `NumpyBackbone` (coordinator/numpy_backbone.py: no torch import); else the
    transformers `Backbone`."""
    if ref.startswith("hash:"):
        return hash_backbone(ref)
    if not svf and pick_device(device) == "cpu":
        from trinity_cli.coordinator.numpy_backbone import NumpyBackbone

        fingerprint, gguf = describe(ref)

        def numpy_engine(directory: Path) -> Any:
            return NumpyBackbone(ref, fingerprint, directory, max_tokens=max_tokens)

        directory = Path(ref).expanduser()
        try:
            if gguf is not None:
                return open_converted(fingerprint, gguf, numpy_engine)
            if directory.is_dir():
                try:
                    return numpy_engine(directory)
                except Unsupported:
                    raise
                except Exception as exc:  # JSON, header or tokenizer errors: the directory is damaged
                    raise AssetError(f"backbone {ref!r} could not be loaded ({type(exc).__name__}: {exc})") from None
        except Unsupported as exc:
            log.info("backbone %s runs on transformers: the numpy engine does not compute %s", ref, exc)
    return Backbone(ref, device=device, max_tokens=max_tokens)


# In a converted backbone directory: {relative path: size in bytes} of every other file.
CONVERTED_SIZES = "trinity-sizes.json"


def _converted_damage(directory: Path) -> str | None:
    """Why a converted backbone directory is damaged (a file missing or of another size than
    recorded), or None. Directories converted before sizes were recorded pass unchecked."""
    record = directory / CONVERTED_SIZES
    if not record.is_file():
        return None
    try:
        sizes = json.loads(record.read_text())
    except ValueError:
        return f"{CONVERTED_SIZES} is not valid JSON"
    for name, size in sizes.items():
        file = directory / name
        if not file.is_file():
            return f"{name} is missing"
        if file.stat().st_size != size:
            return f"{name} has {file.stat().st_size:,} bytes, {size:,} were written"
    return None


def _set_aside(directory: Path, why: str) -> None:
    moved = paths.set_aside(directory)
    log.warning("the converted backbone %s is damaged (%s): set aside as %s; converting it again",
                directory, why, moved.name)


def converted(fingerprint: str, gguf: Path) -> Path:
    """Directory holding the GGUF backbone `gguf` (of `fingerprint`) as safetensors,
    converted once (transformers). Its `CONVERTED_SIZES` file records every file's size; a
    directory whose files disagree (or that lacks them) is set aside and converted again."""
    target = paths.cache_dir("backbones") / fingerprint.split(":", 1)[1][:16]
    if (target / "config.json").is_file():
        why = _converted_damage(target)
        if why is None:
            return target
        _set_aside(target, why)
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    log.info("converting %s to safetensors (once)", gguf)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    folder, name = str(gguf.parent), gguf.name
    # The GGUF loader and the shard writer draw their own progress bars on stderr; libraries
    # stay quiet here.
    with contextlib.redirect_stderr(io.StringIO()):
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model: Any = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)
    # The weights are de-quantised on load; transformers still marks the model as a
    # GGUF-quantised one and refuses to save it, so drop that marker first.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    with paths.atomic_output(target, directory=True) as tmp, contextlib.redirect_stderr(io.StringIO()):
        model.save_pretrained(tmp)  # the whole directory or none of it
        tokenizer.save_pretrained(tmp)
        sizes = {str(f.relative_to(tmp)): f.stat().st_size for f in sorted(tmp.rglob("*")) if f.is_file()}
        (tmp / CONVERTED_SIZES).write_text(json.dumps(sizes, indent=1))
    return target


def open_converted(fingerprint: str, gguf: Path, opener: Callable[[Path], T]) -> T:
    """`opener(directory)` on the GGUF backbone's converted directory (`converted`); one that
    fails to open (safetensors, JSON or tokenizer errors: its files are damaged) is set aside,
    with a warning, and converted again, once. `Unsupported` is not damage: it passes through."""
    source = converted(fingerprint, gguf)
    try:
        return opener(source)
    except Unsupported:
        raise
    except Exception as exc:
        _set_aside(source, f"it does not load: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
    return opener(converted(fingerprint, gguf))


class Backbone(PrefixReuse):
    def __init__(self, ref: str = DEFAULT_BACKBONE, device: str = "auto", max_tokens: int = 1024) -> None:
        super().__init__()
        self.ref = ref
        self.fingerprint, self._gguf = describe(ref)
        self.device = pick_device(device)
        self.max_tokens = max_tokens
        self._load()

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache
        from transformers.utils import logging as hf_logging

        torch.set_num_threads(TORCH_THREADS)  # process-wide: svf.py's matrices too
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        dtype = torch.float32 if self.device == "cpu" else torch.float16
        self.dtype = "float32" if dtype is torch.float32 else "float16"
        model: Any  # transformers' stubs type `.to()` too narrowly for a device string
        try:
            if self._gguf is not None:
                tokenizer, model = self._load_converted(AutoTokenizer, AutoModelForCausalLM, dtype)
            else:
                tokenizer = AutoTokenizer.from_pretrained(self.ref, local_files_only=True)
                model = AutoModelForCausalLM.from_pretrained(self.ref, dtype=dtype, local_files_only=True)
        except OSError as exc:
            raise AssetError(
                f"backbone {self.ref!r} could not be loaded ({str(exc).splitlines()[0]})",
                "use an embedded backbone (smollm2-135m), a gguf:PATH, or a model already in your HF cache",
            ) from None
        tokenizer.truncation_side = "left"
        model.eval()
        model.to(self.device)
        self.tokenizer = tokenizer
        self.model = model
        self.decoder: Any = model.base_model
        # transformers 5 renamed the decoder's `past_key_values` argument to `cache` (the old name
        # still works there, with a deprecation warning on every call); 4.x knows only the old one.
        forward = inspect.signature(self.decoder.forward).parameters
        self._cache_arg = "cache" if "cache" in forward else "past_key_values"
        self.hidden_size = int(model.config.hidden_size)
        self._torch = torch
        self._dynamic_cache = DynamicCache

    def _load_converted(self, tokenizer_cls: Any, model_cls: Any, dtype: Any) -> tuple[Any, Any]:
        """(tokenizer, model) from the converted directory (`open_converted`)."""
        assert self._gguf is not None
        return open_converted(self.fingerprint, self._gguf,
                              lambda source: (tokenizer_cls.from_pretrained(source),
                                              model_cls.from_pretrained(source, dtype=dtype)))

    def linear(self, name: str) -> Any:
        """The nn.Linear called `name` under the decoder; `layers.-1.` means the last layer."""
        parts = name.split(".")
        if len(parts) > 1 and parts[0] == "layers" and parts[1].lstrip("-").isdigit():
            n_layers = len(self.decoder.layers)
            parts[1] = str(int(parts[1]) % n_layers)
        module = self.decoder
        try:
            for part in parts:
                module = module[int(part)] if part.isdigit() else getattr(module, part)
        except (AttributeError, IndexError):
            raise ConfigError(
                f"backbone {self.ref!r} has no matrix {name!r}", f"check the {option('svf_targets')} names"
            ) from None
        if not hasattr(module, "weight") or module.weight.dim() != 2:
            raise ConfigError(f"{name!r} in backbone {self.ref!r} is not a matrix")
        return module

    # -- PrefixReuse's hooks: transformers' DynamicCache
    def _new_cache(self) -> Any:
        return self._dynamic_cache()

    def _cache_length(self, cache: Any) -> int:
        return int(cache.get_seq_length())

    def _copy(self, cache: Any) -> Any:
        return copy.deepcopy(cache)

    def _crop(self, cache: Any, length: int) -> Any:
        cache.crop(length - self._cache_length(cache))  # negative: tokens to remove (every version reads it so)
        return cache

    def encode(self, text: str) -> np.ndarray:
        """The feature of `text`, read block by block over a kept prefix (module docstring)."""
        torch = self._torch
        enc = self.tokenizer(text, truncation=True, max_length=self.max_tokens, return_offsets_mapping=True)
        ids: list[int] = enc["input_ids"]
        cache, done, starts = self._take_prefix(text, ids, [tuple(o) for o in enc["offset_mapping"]])
        out = None
        with torch.inference_mode():
            for begin, end in zip(starts, starts[1:], strict=False):
                if end <= done:
                    continue
                chunk = torch.tensor([ids[begin:end]], device=self.device)
                out = self.decoder(input_ids=chunk, use_cache=True, **{self._cache_arg: cache})
        assert out is not None
        self._keep(ids, cache, done)
        hidden = out.last_hidden_state[0]
        position = -2 if len(ids) >= 2 else -1
        return hidden[position].float().cpu().numpy().astype(np.float32)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text)["input_ids"])
