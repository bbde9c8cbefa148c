"""Singular-value fine-tuning of backbone matrices.

For each target matrix W = U·diag(S)·Vᵀ (decomposed once), offsets o give

    W' = U·diag(S ⊙ (1 + o))·Vᵀ · (ΣS / Σ(S ⊙ (1 + o)))

the rescaling keeps the sum of singular values, so evolution changes the shape of the
spectrum, not the matrix's overall gain. Offsets of zero give back W exactly (up to
float error). Targets are nn.Linear names under the decoder, e.g.
`layers.-1.mlp.down_proj` (negative layer indices count from the end); each contributes
min(out, in) offsets, in target order, to the front of the flat parameter vector
(see head.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trinity_cli.coordinator.backbone import Backbone

DEFAULT_TARGETS = ("layers.-1.mlp.down_proj", "layers.-1.self_attn.o_proj")


class SVF:
    def __init__(self, backbone: Backbone, targets: tuple[str, ...] | list[str] = DEFAULT_TARGETS) -> None:
        import torch

        self._torch = torch
        self.backbone = backbone
        self.targets = list(targets)
        self._modules: list[Any] = []
        self._svd: list[tuple[Any, Any, Any]] = []
        for name in self.targets:
            module = backbone.linear(name)
            weight = module.weight.detach().to(torch.float32)
            u, s, vh = torch.linalg.svd(weight, full_matrices=False)
            self._modules.append(module)
            self._svd.append((u, s, vh))
        self.sizes = [int(s.numel()) for _, s, _ in self._svd]
        self._current = np.zeros(sum(self.sizes), dtype=np.float32)

    @property
    def n_params(self) -> int:
        return sum(self.sizes)

    def apply(self, offsets: np.ndarray) -> None:
        """Set every target matrix from `offsets` (length n_params); a no-op if unchanged."""
        offsets = np.asarray(offsets, dtype=np.float32)
        if offsets.size != self.n_params:
            raise ValueError(f"SVF needs {self.n_params} offsets, got {offsets.size}")
        if np.array_equal(offsets, self._current):
            return
        torch = self._torch
        start = 0
        with torch.no_grad():
            for module, (u, s, vh), size in zip(self._modules, self._svd, self.sizes, strict=True):
                o = torch.from_numpy(offsets[start : start + size].copy())
                start += size
                scaled = s * (1 + o)
                total = scaled.sum()
                factor = s.sum() / total if abs(float(total)) > 1e-12 else 1.0
                new = (u * (scaled * factor)) @ vh
                module.weight.copy_(new.to(module.weight.dtype))
        self._current = offsets.copy()
