"""IFEval and IFBench as task families: their data, fixed splits and the benchmarks' own checkers."""

from __future__ import annotations

from pathlib import Path

from trinity_cli import tasks
from trinity_cli.tasks import ifeval_checks
from trinity_cli.tasks.ifeval import score, score_all

TEST_IDS = Path(__file__).parent / "data" / "ifeval_test_ids.txt"


def test_ifeval_splits_are_the_ids_written_down_before_any_test_item_was_played() -> None:
    written = [line for line in TEST_IDS.read_text().splitlines() if line and not line.startswith("#")]
    assert [item.id for item in tasks.load_split("ifeval", "test")] == written
    assert tasks.split_sizes("ifeval") == {"train": 291, "val": 100, "test": 150}
    assert {i.id for i in tasks.load_split("ifeval", "val")}.isdisjoint(written)


def test_ifbench_is_all_test_and_leaves_out_what_cannot_be_checked_offline() -> None:
    sizes = tasks.split_sizes("ifbench")
    assert sizes["train"] == sizes["val"] == 0 and sizes["test"] == 282
    for item in tasks.load_split("ifbench", "test"):
        assert not ifeval_checks.UNSCORABLE & set(item.reference["instruction_id_list"])


def test_items_are_the_benchmark_prompts_asked_as_they_are() -> None:
    item = next(i for i in tasks.load_items("ifeval") if i.id == "1000")
    assert item.prompt.startswith("Write a 300+ word summary of the wikipedia page")
    assert item.scorer == "freeform"
    assert item.reference["instruction_id_list"][0] == "punctuation:no_comma"


def _reference(ids: list[str], kwargs: list[dict], prompt: str = "Write something.") -> dict:
    return {"benchmark": "ifeval", "prompt": prompt, "instruction_id_list": ids, "kwargs": kwargs}


def test_the_checkers_score_strict_and_loose_prompt_and_instruction_level() -> None:
    ref = _reference(["punctuation:no_comma", "change_case:english_lowercase"], [{}, {}])
    assert score("all lower case and no commas here", ref) == 1.0
    assert score("all lower case, but a comma", ref) == 0.0
    mixed = score_all("Title\nall lower case here", ref)
    assert (mixed.prompt_strict, mixed.instruction_strict) == (0.0, 0.5)
    assert mixed.prompt_loose == 1.0  # loose drops the first line, as IFEval's loose accuracy does


def test_sentence_counts_run_offline_with_ifevals_own_splitter() -> None:
    ref = _reference(["length_constraints:number_sentences"], [{"relation": "less than", "num_sentences": 3}])
    assert score("One. Two.", ref) == 1.0
    assert score("One. Two. Three. Four.", ref) == 0.0


def test_the_answer_scored_is_the_one_ask_prints() -> None:
    ref = _reference(["startend:quotation"], [{}])
    assert score('Sure, here is the text:\n"Wrapped in quotes."', ref) == 1.0
    assert score("Turns so far:\n[Worker]\n\"Wrapped.\"\n\n[Verifier]\nVerdict: ACCEPT", ref) == 1.0


def test_ifbench_checkers_load_without_downloading_nltk_data() -> None:
    assert len(ifeval_checks.registry("ifbench")) == 58
    kwargs = [{"min_words": 2, "max_words": 5}]
    ranged = ["count:word_count_range"]
    assert ifeval_checks.evaluate("ifbench", "Write.", ranged, kwargs, "three short words").prompt_strict
    assert not ifeval_checks.evaluate("ifbench", "Write.", ranged, kwargs, "one").prompt_strict
    # word_tokenize needs punkt; the stand-in (NLTK's Treebank tokenizer) runs without it
    sentence = ifeval_checks.evaluate("ifbench", "Write.", ["words:keywords_specific_position"],
                                      [{"keyword": "giggle", "n": 1, "m": 2}], "I giggle now. Then more.")
    assert sentence.prompt_strict == 1.0


def test_the_language_checks_give_one_verdict_for_one_text() -> None:
    # langdetect samples at random; on a text mixing languages it answers "es", "fr" or "ca" by chance
    # unless seeded (ifeval_checks.registry seeds it)
    text = "Der cat est sur la mesa con el dog"
    verdicts = {ifeval_checks.evaluate("ifeval", "Answer in Spanish.", ["language:response_language"],
                                       [{"language": "es"}], text).prompt_strict for _ in range(30)}
    assert len(verdicts) == 1
