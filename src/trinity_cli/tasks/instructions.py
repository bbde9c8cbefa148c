"""The `instructions` task family: free-form requests with constraints a program can check
(in the spirit of IFEval), made here from fixed lists, so they ship with no data file.

Each item is one writing request (`TOPICS`: an explanation, a letter, a story, advice, a
poem...) with one or two stated constraints (`_TEMPLATES`, answer_kinds/constraints.py's types),
chosen by `seeds.seed` of the topic and the variant number (`_chosen`): the same items, ids, wording
and references on every machine. Item ids are "t<topic>-v<variant>" (TOPICS' order, from 0);
40 topics × 6 variants = 240 items, split by id as every task is (tasks/registry.py).

Reference: the list of constraint dicts; scorer `freeform` (answer_kinds/constraints.py's
`score_constraints`): an answer scores 1.0 when it meets all of them. The constraints are
said in the prompt in words answer_kinds/constraints.py's `parse` also reads, so `ask` checks the
same things when a person types such a request (tests/test_answer_kinds.py holds the two
readings equal on every item).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trinity_cli import seeds
from trinity_cli.tasks.items import TaskItem

Constraint = dict[str, Any]  # answer_kinds/constraints.py's: {"type": TYPE, ...parameters}

# (request, two words it would use, two words it would naturally use that a constraint may forbid)
TOPICS: tuple[tuple[str, tuple[str, str], tuple[str, str]], ...] = (
    ("Write a short blog post about the benefits of walking every day.", ("health", "morning"), ("walk", "steps")),
    ("Explain how a rainbow forms.", ("light", "droplets"), ("rain", "colors")),
    ("Describe a perfect weekend in the mountains.", ("trail", "cabin"), ("mountain", "weekend")),
    ("Write a letter to a neighbour asking them to keep the noise down at night.", ("sleep", "kindly"),
     ("noise", "loud")),
    ("Give advice to a student who is nervous before an exam.", ("breathe", "practice"), ("exam", "nervous")),
    ("Write a poem about the sea.", ("waves", "salt"), ("sea", "ocean")),
    ("Explain what a computer virus is to a ten-year-old.", ("program", "copy"), ("virus", "computer")),
    ("Write a product description for a reusable water bottle.", ("steel", "plastic"), ("bottle", "water")),
    ("Summarize the story of Little Red Riding Hood.", ("grandmother", "forest"), ("wolf", "red")),
    ("Write a short story about a robot who learns to paint.", ("canvas", "brush"), ("robot", "paint")),
    ("Explain why the seasons change during the year.", ("tilt", "orbit"), ("sun", "summer")),
    ("Write a speech for a friend's wedding.", ("love", "laughter"), ("wedding", "marriage")),
    ("Describe how to make a cup of tea.", ("kettle", "leaves"), ("tea", "cup")),
    ("Write an email to a manager asking for a day off next Friday.", ("Friday", "schedule"), ("day", "off")),
    ("Explain the difference between weather and climate.", ("decades", "forecast"), ("weather", "climate")),
    ("Write a review of a cozy neighborhood cafe.", ("coffee", "pastries"), ("cafe", "cozy")),
    ("Give tips for keeping houseplants alive.", ("sunlight", "soil"), ("plants", "water")),
    ("Write a short biography of an imaginary inventor named Mira Holt.", ("invention", "workshop"),
     ("inventor", "Mira")),
    ("Explain how vaccines train the immune system.", ("antibodies", "memory"), ("vaccine", "immune")),
    ("Write a motivational message for someone starting a new job.", ("team", "learn"), ("job", "new")),
    ("Describe the life cycle of a butterfly.", ("caterpillar", "chrysalis"), ("butterfly", "egg")),
    ("Write a limerick about a forgetful cat.", ("whiskers", "nap"), ("cat", "forgot")),
    ("Explain how to change a flat bicycle tire.", ("tube", "lever"), ("tire", "flat")),
    ("Write a thank-you note to a teacher.", ("patience", "lessons"), ("teacher", "thank")),
    ("Describe a busy city street at rush hour.", ("traffic", "horns"), ("city", "busy")),
    ("Explain what photosynthesis is.", ("chlorophyll", "sugar"), ("plant", "light")),
    ("Write a short fable about a greedy crow.", ("moral", "cheese"), ("crow", "greedy")),
    ("Give advice on saving money as a university student.", ("budget", "groceries"), ("money", "save")),
    ("Write an advertisement for a small bakery.", ("bread", "fresh"), ("bakery", "cake")),
    ("Explain how the internet sends a message from one computer to another.", ("packets", "router"),
     ("internet", "message")),
    ("Describe your favorite season and why you like it.", ("autumn", "leaves"), ("season", "favorite")),
    ("Write a dialogue between a dog and a squirrel.", ("tree", "bark"), ("dog", "squirrel")),
    ("Explain why sleep is important for health.", ("memory", "rest"), ("sleep", "health")),
    ("Write a welcome message for new members of a chess club.", ("openings", "tournament"), ("chess", "club")),
    ("Describe how a bill becomes a law.", ("vote", "committee"), ("law", "bill")),
    ("Write a short horror story set in a library.", ("shadows", "shelves"), ("library", "book")),
    ("Give tips for running a first marathon.", ("pace", "hydration"), ("run", "marathon")),
    ("Explain what a black hole is.", ("gravity", "horizon"), ("black", "hole")),
    ("Write a haiku sequence about winter.", ("snow", "silence"), ("winter", "cold")),
    ("Write instructions for planting a tree.", ("shovel", "roots"), ("tree", "plant")),
)

VARIANTS = 6

Template = Callable[[tuple[str, str], tuple[str, str], int], tuple[str, Constraint]]

# Each template: (the topic's words, its forbidden-word pair, a small number) -> (wording, constraint).
_TEMPLATES: tuple[Template, ...] = (
    lambda w, x, n: ("Do not use any commas in your response.", {"type": "no_commas"}),
    lambda w, x, n: ("Write your entire response in lowercase letters only.", {"type": "lowercase"}),
    lambda w, x, n: (f"Answer in at most {40 + 20 * (n % 3)} words.",
                     {"type": "words", "relation": "at_most", "n": 40 + 20 * (n % 3)}),
    lambda w, x, n: (f"Answer in at least {100 + 50 * (n % 2)} words.",
                     {"type": "words", "relation": "at_least", "n": 100 + 50 * (n % 2)}),
    lambda w, x, n: (f"Use exactly {3 + n % 2} bullet points in Markdown, like this: * a point.",
                     {"type": "bullets", "n": 3 + n % 2}),
    lambda w, x, n: ('End your response with the exact phrase "Is there anything else I can help with?"',
                     {"type": "ends_with", "phrase": "Is there anything else I can help with?"}),
    lambda w, x, n: (f'Include the keywords "{w[0]}" and "{w[1]}" in your response.',
                     {"type": "include", "words": [w[0], w[1]]}),
    lambda w, x, n: (f'Do not use the words "{x[0]}" or "{x[1]}".', {"type": "exclude", "words": [x[0], x[1]]}),
    lambda w, x, n: ("Wrap your entire response in double quotation marks.", {"type": "quoted"}),
    lambda w, x, n: ("Give it a title wrapped in double angular brackets, such as <<my title>>.", {"type": "title"}),
    lambda w, x, n: ("Write your entire response in all capital letters.", {"type": "uppercase"}),
    lambda w, x, n: ("Write exactly 2 paragraphs, separated by the Markdown divider ***.",
                     {"type": "paragraphs", "n": 2}),
)
# Pairs that cannot both hold: upper and lower case; a minimum of 100 words with bullets or a
# 40-word cap; quotation marks around a response that must end with a phrase.
_CLASH = ({1, 10}, {2, 3}, {5, 8})


def _chosen(topic: int, variant: int) -> list[int]:
    """The templates of item (topic, variant): the topic's templates in an order drawn from
    its number (`seeds.seed`), the variant's own first (so no two variants of a topic are the
    same request); one for even variants, that and the next that does not clash for odd ones."""
    order = sorted(range(len(_TEMPLATES)), key=lambda t: seeds.seed(f"instructions:{topic}:{t}"))
    first = order[variant]
    if variant % 2 == 0:
        return [first]
    second = next(t for t in order[variant + 1:] + order[:variant] if {first, t} not in _CLASH)
    return [first, second]


def load() -> list[TaskItem]:
    """Every item of the family (module docstring), in topic and variant order."""
    items = []
    for t, (request, words, forbidden) in enumerate(TOPICS):
        for v in range(VARIANTS):
            said, constraints = [], []
            for template in _chosen(t, v):
                wording, constraint = _TEMPLATES[template](words, forbidden, t + v)
                said.append(wording)
                constraints.append(constraint)
            items.append(TaskItem(task="instructions", id=f"t{t}-v{v}", prompt=f"{request} {' '.join(said)}",
                                  reference=constraints, scorer="freeform"))
    return items
