"""IFEval's and IFBench's own instruction checkers, from the maintained `if-verifiable` package
(Apache-2.0: Google's IFEval checkers and AllenAI's IFBench checkers), run offline.

What this module adds to them, and why (docs/freeform.md, "Scoring", says how many prompts each
touches):

- `if_verifiable/__init__.py` imports `datasets` (to download the benchmarks from a hub); only its
  checker subpackages are needed here, so the package is entered as a bare namespace module and
  its `ifeval` / `ifbench` subpackages imported from it: the checkers are the package's files,
  unchanged.
- NLTK's punkt data cannot be installed offline. IFEval's `count_sentences` (punkt) is replaced by
  the length of IFEval's own `split_into_sentences` (the rule-based splitter the same module
  ships), and `nltk.word_tokenize` (punkt inside) by NLTK's data-free Treebank tokenizer over that
  splitter's sentences. IFBench's import-time `nltk.download` calls are skipped (no network).
- The two IFBench instructions that need NLTK data besides punkt (`ratio:stop_words`: the
  stopwords corpus; `words:start_verb`: the POS tagger) are `UNSCORABLE`: items holding one are
  left out of the `ifbench` family (tasks/ifeval.py).
- `langdetect` (the language checks, and the all-capitals one that asks for English) samples at
  random; it is seeded (0), so the same text gets the same verdict in every process.

`evaluate(benchmark, prompt, ids, kwargs, response)` -> per-instruction strict and loose results
and the four scores (`if_verifiable.common.evaluate_instructions`: strict on the response as it is,
loose when any of its eight variants passes: first or last line dropped, asterisks removed).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trinity_cli.errors import AssetError

BENCHMARKS = ("ifeval", "ifbench")
UNSCORABLE = frozenset({"ratio:stop_words", "words:start_verb"})


@dataclass(frozen=True)
class Scores:
    """One response's result: each instruction's (strict, loose) pass, and the prompt- and
    instruction-level scores (`prompt_strict` is 1.0 when every instruction passes strictly)."""

    instructions: tuple[tuple[str, bool, bool], ...]
    prompt_strict: float
    prompt_loose: float
    instruction_strict: float
    instruction_loose: float


def _package_dir() -> Path:
    spec = importlib.util.find_spec("if_verifiable") if "if_verifiable" not in sys.modules else None
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    loaded = sys.modules.get("if_verifiable")
    if loaded is not None and getattr(loaded, "__path__", None):
        return Path(next(iter(loaded.__path__)))
    raise AssetError("the IFEval checkers' package 'if-verifiable' is not installed", hint="pip install if-verifiable")


class _Tokenize:
    """What the checkers call as `nltk.<name>`: NLTK itself, but `word_tokenize` without punkt."""

    def __init__(self, nltk: Any, sentences: Any) -> None:
        self._nltk = nltk
        self._sentences = sentences
        self._treebank = nltk.tokenize.TreebankWordTokenizer()

    def word_tokenize(self, text: str, language: str = "english", preserve_line: bool = False) -> list[str]:
        parts = [text] if preserve_line else self._sentences(text)
        return [token for part in parts for token in self._treebank.tokenize(part)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._nltk, name)


@functools.cache
def registry(benchmark: str) -> dict[str, Any]:
    """The benchmark's instruction id -> checker class, loaded as the module docstring says."""
    if benchmark not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {benchmark!r}")
    if "if_verifiable" not in sys.modules:
        bare = types.ModuleType("if_verifiable")
        bare.__path__ = [str(_package_dir())]
        sys.modules["if_verifiable"] = bare
    nltk: Any = importlib.import_module("nltk")
    download = nltk.download
    nltk.download = lambda *args, **kwargs: False  # ifbench asks at import; offline it only waits
    try:
        util: Any = importlib.import_module(f"if_verifiable.{benchmark}.instructions_util")
        checkers: Any = importlib.import_module(f"if_verifiable.{benchmark}.instructions")
        found: Any = importlib.import_module(f"if_verifiable.{benchmark}.instructions_registry")
    finally:
        nltk.download = download
    stand_in = _Tokenize(nltk, util.split_into_sentences)
    util.nltk = stand_in
    if hasattr(checkers, "nltk"):
        checkers.nltk = stand_in
    util.count_sentences = lambda text: len(util.split_into_sentences(text))
    # langdetect samples at random: unseeded, the language checks (and the capital-letters one,
    # which asks for English) can give another verdict on the same text in the next process
    importlib.import_module("langdetect").DetectorFactory.seed = 0
    return dict(found.INSTRUCTION_DICT)


@functools.cache
def _common() -> Any:
    registry("ifeval")  # enters the package as a bare module first
    return importlib.import_module("if_verifiable.common")


def evaluate(benchmark: str, prompt: str, ids: list[str], kwargs: list[dict[str, Any]], response: str) -> Scores:
    """`response` checked against the item's instructions (module docstring)."""
    results, scores = _common().evaluate_instructions(
        response=response, instruction_id_list=ids, kwargs_list=kwargs, prompt=prompt,
        instruction_registry=registry(benchmark))
    return Scores(tuple((r.instruction_id, bool(r.strict_pass), bool(r.loose_pass)) for r in results),
                  float(scores.binary_strict), float(scores.binary_loose),
                  float(scores.partial_strict), float(scores.partial_loose))

