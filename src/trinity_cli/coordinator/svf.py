"""Singular-value fine-tuning (SVF) of backbone matrices.

For each target matrix W = U·diag(S)·Vᵀ (decomposed once), offsets o give

    S' = S ⊙ exp(o) · (ΣS / Σ(S ⊙ exp(o)))        W' = U·diag(S')·Vᵀ

Parameterisation (`"scale": "exp"` in a head's manifest, head.SVF_SCALE): each singular value is
multiplied by exp(o), which is positive for every o, so no offset can flip the sign of a
singular direction or zero it (the earlier `1 + o` did for o <= -1); o and -o undo each
other, and o = 0 leaves the value as it is. The rescaling keeps the sum of singular values,
so evolution changes the shape of the spectrum, not the matrix's overall gain.

Zero offsets are the identity exactly: a target whose offsets are all zero gets its original
weight tensor back (a stored copy, not a reconstruction from U, S, V, which would be off by
float error), so the backbone's features are reproduced bit for bit.

Device: U, S, V are kept in float32 on the matrix's device (on CPU for MPS, which has no
SVD); offsets are moved to them and W' is cast to the matrix's dtype and device.

Targets are nn.Linear names under the decoder, e.g. `layers.-1.mlp.down_proj` (negative
layer indices count from the end); each contributes min(out, in) offsets, in target order,
to the front of the flat parameter vector (see head.py).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from trinity_cli.coordinator.backbone import Backbone
from trinity_cli.coordinator.head import SVF_SCALE

DEFAULT_TARGETS = ("layers.-1.mlp.down_proj", "layers.-1.self_attn.o_proj")


def scaled_spectrum(s: Any, o: Any) -> Any:
    """S' of the module docstring for torch tensors `s` (singular values) and `o` (offsets).

    Computed as ΣS · softmax(log S + o), the same value without overflow for large o."""
    import torch

    total = s.sum()
    if not bool(total > 0):
        return s.clone()
    return total * torch.softmax(s.log() + o, dim=0)


class SVF:
    def __init__(self, backbone: Backbone, targets: tuple[str, ...] | list[str] = DEFAULT_TARGETS) -> None:
        import torch

        self._torch = torch
        self.backbone = backbone
        self.targets = list(targets)
        self._modules: list[Any] = []
        self._original: list[Any] = []
        self._svd: list[tuple[Any, Any, Any]] = []
        for name in self.targets:
            module = backbone.linear(name)
            weight = module.weight.detach()
            work = weight.device if weight.device.type != "mps" else torch.device("cpu")
            u, s, vh = torch.linalg.svd(weight.to(device=work, dtype=torch.float32), full_matrices=False)
            self._modules.append(module)
            self._original.append(weight.clone())
            self._svd.append((u, s, vh))
        self.sizes = [int(s.numel()) for _, s, _ in self._svd]
        self._current = [np.zeros(size, dtype=np.float32) for size in self.sizes]

    @property
    def n_params(self) -> int:
        return sum(self.sizes)

    def manifest(self) -> dict[str, Any]:
        """The head manifest's `svf` entry for this SVF."""
        return {"targets": list(self.targets), "sizes": list(self.sizes), "scale": SVF_SCALE}

    def apply(self, offsets: np.ndarray) -> None:
        """Set every target matrix from `offsets` (length n_params); targets whose offsets
        did not change since the last call are left as they are."""
        offsets = np.asarray(offsets, dtype=np.float32).ravel()
        if offsets.size != self.n_params:
            raise ValueError(f"SVF needs {self.n_params} offsets, got {offsets.size}")
        torch = self._torch
        start = 0
        with torch.no_grad():
            for t, (module, (u, s, vh), size) in enumerate(zip(self._modules, self._svd, self.sizes, strict=True)):
                part = offsets[start : start + size]
                start += size
                if np.array_equal(part, self._current[t]):
                    continue
                if not part.any():
                    module.weight.copy_(self._original[t])
                else:
                    o = torch.from_numpy(part.copy()).to(s.device)
                    new = (u * scaled_spectrum(s, o)) @ vh
                    module.weight.copy_(new.to(device=module.weight.device, dtype=module.weight.dtype))
                self._current[t] = part.copy()
        # What the backbone's kept KV prefixes are valid for (backbone.py): the loaded
        # weights ("") or these offsets.
        current = np.concatenate(self._current) if self._current else np.zeros(0, dtype=np.float32)
        self.backbone.weights_state = "" if not current.any() else hashlib.sha256(current.tobytes()).hexdigest()
