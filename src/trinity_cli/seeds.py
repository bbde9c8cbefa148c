"""Numbers derived from text by sha256: the one way trinity turns a name into a seed, a rank
or a position, so the same text gives the same number on every machine and at any
parallelism (no generator state).

    digest(text)  sha256 of the UTF-8 text
    seed(text)    its first 4 bytes, little-endian: 0 <= seed < 2**32
Callers document the text they hash (the seed's contract): ask.question_seed,
pool.attempt_seed, bench/systems.episode_seed, tasks/mix (ranks), tasks/registry (splits).
"""

from __future__ import annotations

import hashlib


def digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def seed(text: str) -> int:
    return int.from_bytes(digest(text)[:4], "little")
