"""A featurizer without a neural network: hashed word and bigram counts (numpy only).

Backbone reference `hash:DIM` (e.g. `hash:256`). Each lower-cased word and word bigram of
the text adds ±1 to one of DIM slots chosen by blake2b, then the vector is scaled to unit
norm. It loads instantly and needs no torch, which makes it useful for quick experiments
on tiny budgets and for hermetic tests of evolution; it reads far less than an LM does.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

_WORD = re.compile(r"\w+")


class HashBackbone:
    def __init__(self, ref: str) -> None:
        try:
            self.hidden_size = int(ref.split(":", 1)[1])
        except (IndexError, ValueError):
            raise ValueError(f"bad hash backbone {ref!r}: use hash:DIM, e.g. hash:256") from None
        if self.hidden_size < 2:
            raise ValueError("hash backbone needs DIM >= 2")
        self.ref = ref
        self.fingerprint = f"hash:{self.hidden_size}:v1"
        self.device = "cpu"
        self.dtype = "float32"
        self.max_tokens = 0  # no token limit

    def encode(self, text: str) -> np.ndarray:
        words = _WORD.findall(text.lower())
        grams = words + [a + " " + b for a, b in zip(words, words[1:], strict=False)]
        vec = np.zeros(self.hidden_size, dtype=np.float32)
        for gram in grams:
            digest = hashlib.blake2b(gram.encode(), digest_size=8).digest()
            slot = int.from_bytes(digest[:4], "little") % self.hidden_size
            vec[slot] += 1.0 if digest[4] & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm else vec

    def count_tokens(self, text: str) -> int:
        return len(_WORD.findall(text))
