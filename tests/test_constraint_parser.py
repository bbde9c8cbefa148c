"""What trinity's constraint parser (answer_kinds/constraints.py `parse`) reads, on a labelled set: 80 requests
of our own that state no constraint (tests/data/plain_requests.txt) and IFEval's train split, labelled
by IFEval's own instruction ids where trinity has a check of the same kind (`SAME`). The parser was
tuned on these alone, never on IFEval's validation or test items."""

from __future__ import annotations

from pathlib import Path

import pytest

from trinity_cli import tasks
from trinity_cli.answer_kinds.constraints import parse

PLAIN = [line for line in (Path(__file__).parent / "data" / "plain_requests.txt").read_text().splitlines()
         if line and not line.startswith("#")]
# IFEval instruction id -> the trinity constraint type that checks the same thing.
SAME = {"punctuation:no_comma": "no_commas", "change_case:english_lowercase": "lowercase",
        "change_case:english_capital": "uppercase", "length_constraints:number_words": "words",
        "length_constraints:number_sentences": "sentences", "detectable_format:number_bullet_lists": "bullets",
        "length_constraints:number_paragraphs": "paragraphs", "startend:end_checker": "ends_with",
        "keywords:existence": "include", "keywords:forbidden_words": "exclude", "startend:quotation": "quoted",
        "detectable_format:title": "title", "keywords:frequency": "frequency", "keywords:letter_frequency": "letters",
        "detectable_format:number_highlighted_sections": "highlights",
        "detectable_content:number_placeholders": "placeholders", "detectable_content:postscript": "postscript"}
# The twelve instruction types trinity read before it read word and letter counts, highlights,
# placeholders and postscripts (docs/freeform.md's table counts these).
FIRST_TWELVE = {i for i, t in SAME.items() if t not in ("frequency", "letters", "highlights", "placeholders",
                                                        "postscript")}


def detection(split: str, ids: set[str] | None = None) -> tuple[int, int, list[tuple[str, str]]]:
    """(labelled constraints found, labelled constraints, types read that the item does not
    state in a way trinity checks) on IFEval's `split`, over the instruction ids `ids` (default:
    every one in `SAME`); the last only for the types whose misreading fails an answer that
    follows the request (case, start, quotes, commas, title, postscript)."""
    found = total = 0
    wrong: list[tuple[str, str]] = []
    for item in tasks.load_split("ifeval", split):
        labels = {SAME[i] for i in item.reference["instruction_id_list"] if i in (SAME if ids is None else ids)}
        read = {c["type"] for c in parse(item.prompt)}
        found += len(labels & read)
        total += len(labels)
        wrong += [(t, item.id) for t in read - labels if t in ("uppercase", "starts_with", "quoted", "no_commas",
                                                               "title", "postscript")]
    return found, total, wrong


def test_a_request_that_states_no_constraint_gets_no_check() -> None:
    assert len(PLAIN) >= 75
    assert {r: parse(r) for r in PLAIN if parse(r)} == {}


def test_ifeval_train_constraints_are_read_and_none_that_would_fail_a_good_answer() -> None:
    found, total = detection("train", FIRST_TWELVE)[:2]
    assert total == 265 and found / total >= 0.90  # 259 of 265 when this test was written
    found, total, wrong = detection("train")
    assert found / total >= 0.90  # 335 of 349 with the five types read since
    # "Answer in all caps" is stated though IFEval lists only its placeholders
    assert wrong == [("uppercase", "3221")]


@pytest.mark.parametrize(("request_", "not_read"), [
    ("Your song should contain at least 10 words in all capital letters.", {"uppercase", "words"}),
    ("Use words in all capital letters at least 3 times to highlight key points.", {"uppercase"}),
    ("There should be 4 paragraphs. Paragraph 2 must start with the word \"it\".", {"starts_with"}),
    ("Write it in all capital letters, no lowercase letters allowed.", {"lowercase"}),
    ("Avoid using the letter i more than twice.", {"letters_more"}),
    ("At least 5 words in the output should be in all caps.", {"words"}),
    ("Use the words of a pirate.", {"include"}),
    ("Write Python code and include the line numbers.", {"include"}),
    ("Write a 300 word essay at least 3 pages long.", {"frequency"}),
    ("Create a dialogue between two people who are both trying to avoid using the letter t.", {"letters"}),
])
def test_wordings_of_other_constraints_are_not_misread(request_: str, not_read: set[str]) -> None:
    read = parse(request_)
    assert not_read.isdisjoint(c["type"] for c in read)
    # "more than" under a negation is read as "at most", never as asked for
    assert not any(c.get("relation") in ("more_than", "at_least") for c in read if c["type"] == "letters")


@pytest.mark.parametrize(("request_", "expected"), [
    ("Refrain from using any commas.", {"type": "no_commas"}),
    ("Commas are not allowed in the song.", {"type": "no_commas"}),
    ("Write a blog post with 400 or more words.", {"type": "words", "relation": "at_least", "n": 400}),
    ("Keep your entire response 100 words or less.", {"type": "words", "relation": "at_most", "n": 100}),
    ("Write a 300+ word summary.", {"type": "words", "relation": "at_least", "n": 300}),
    ("Put double quotes around your entire response.", {"type": "quoted"}),
    ("Do not include keywords 'mileage' or 'fuel' in the response.", {"type": "exclude", "words": ["mileage", "fuel"]}),
    ("The word \"rock\" should not appear in your response.", {"type": "exclude", "words": ["rock"]}),
    ('End your entire response with the exact phrase "Any other questions?"',
     {"type": "ends_with", "phrase": "Any other questions?"}),
    ("Your entire response must be in lowercases.", {"type": "lowercase"}),
    ("Do not include the words perfume, fresh, or good in the advertisement.",
     {"type": "exclude", "words": ["perfume", "fresh", "good"]}),
    ("The words startup and capsule cannot be in the response.", {"type": "exclude", "words": ["startup", "capsule"]}),
    ("Avoid the keywords: 'divide', 'answer'.", {"type": "exclude", "words": ["divide", "answer"]}),
    ("Don't forget to include the keywords waste, material and meal.",
     {"type": "include", "words": ["waste", "material", "meal"]}),
    ("End with the exact phrase Is there anything else I can help with?",
     {"type": "ends_with", "phrase": "Is there anything else I can help with?"}),
    ("Finish the song with:  Peace!  No additional words should follow.", {"type": "ends_with", "phrase": "Peace!"}),
    ("Make sure your entire response is wrapped in double quotation marks.", {"type": "quoted"}),
    ("Write a song that contains 20 to 25 sentences.", {"type": "sentences", "relation": "at_most", "n": 25}),
    ("Your entire reply should contain 600 to 700 words.", {"type": "words", "relation": "at_least", "n": 600}),
    ("Separate your song into 3 parts, where each part is separated with ***.",
     {"type": "paragraphs", "n": 3, "by": "***"}),
    ("Write exactly 9 very short bullet points.", {"type": "bullets", "n": 9}),
    ("All letters in your entire response should be capitalized.", {"type": "uppercase"}),
    ("Your response must be in English, with no capital letters.", {"type": "lowercase"}),
    ("Make sure to use the word war at least 8 times.",
     {"type": "frequency", "word": "war", "relation": "at_least", "n": 8}),
    ('The word "fake" should appear 6 or 7 times.',
     {"type": "frequency", "word": "fake", "relation": "at_most", "n": 7}),
    ("Make sure the letter e appears at least 50 times.",
     {"type": "letters", "letter": "e", "relation": "at_least", "n": 50}),
    ("Avoid using the letter i more than twice.", {"type": "letters", "letter": "i", "relation": "at_most", "n": 2}),
    ('Don\'t contain the letter "p" in your reply.',
     {"type": "letters", "letter": "p", "relation": "less_than", "n": 1}),
    ("Highlight at least 3 sections with markdown, i.e. *highlighted section*.", {"type": "highlights", "n": 3}),
    ("Include at least five placeholders represented by square brackets, such as [name].",
     {"type": "placeholders", "n": 5}),
    ("At the end of your response, please explicitly add a postscript starting with P.P.S",
     {"type": "postscript", "marker": "P.P.S"}),
    ("Compare TCP and UDP in a table with three rows.", {"type": "rows", "n": 3}),
])
def test_the_wordings_ifeval_train_uses_are_read(request_: str, expected: dict) -> None:
    assert expected in parse(request_)
