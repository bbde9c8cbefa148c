"""The answer kinds read as a short value and compared by it (numeric, choice, math, exact,
and the kind-free short answer), and code, judged by running it. Their readings and scorers
are tasks/answers.py's and tasks/scoring.py's, unchanged; what each kind asks of an episode
is declared on its class (answer_kinds/base.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.answer_kinds.examples import Examples, defines_code
from trinity_cli.answer_kinds.freeform import states_response_rules
from trinity_cli.tasks import scoring
from trinity_cli.tasks.answers import (
    FinalAnswer,
    choice_answer,
    exact_answer,
    extract_choice,
    extract_math_answer,
    math_answer,
    number_answer,
    number_text,
)
from trinity_cli.tasks.code import extract_code, score_code
from trinity_cli.tasks.doctests import examples_in_text

_NUMBER = r"(?:\d[\d,]*(?:\.\d+)?|\.\d+)"
_WORDS = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|sixty|" \
         r"hundred|thousand|million|dozen|half|twice|double)"
_UNITS = (r"(?:mm|cm|m|km|in|inch(?:es)?|ft|feet|foot|yards?|miles?|meters?|metres?|kilometers?|kilometres?|"
          r"centimeters?|millimeters?|g|kg|mg|lbs?|pounds?|ounces?|oz|grams?|kilograms?|tons?|tonnes?|l|ml|liters?|"
          r"litres?|milliliters?|gallons?|quarts?|pints?|cups?|tablespoons?|teaspoons?|seconds?|minutes?|hours?|days?|"
          r"weeks?|months?|years?|°?[cfk]|celsius|fahrenheit|kelvin|degrees?|mph|km/h|kph|m/s|acres?|hectares?|"
          r"bytes?|kb|mb|gb|tb|bits?|calories|kcal|joules?|watts?|dollars?|euros?|cents?)")
# A short value asked for in so many words: a number, a yes/no, a single word, a letter.
_STATED = re.compile(
    r"\b(?:answer|reply|respond|say)\b[^.?!\n]{0,25}\byes\b\W{0,3}(?:or|/)\W{0,3}no\b|^\W*yes or no\b"
    r"|\byes or no\W*$|\b(?:answer|reply|respond)\s+(?:with\s+)?(?:only\s+|just\s+)?(?:one|a single|a)\s+"
    r"(?:word|number|letter|name|value)\b|\b(?:just|only) (?:the|a|one) (?:number|name|letter|word|value|answer)\b"
    r"|\bone[- ]word answer\b|(?:^|\s)\(?[Aa][).]\s*\w[^\n]{0,80}\s\(?[Bb][).]\s*\w"
    r"|\b(?:just|only)\s+(?:a\s+)?(?:yes\s+or\s+no|true\s+or\s+false)\b|^\W*true or false\b"
    r"|\b(?:in|with) (?:one|a single) word\b|\bone word only\b|\b(?:the )?letter only\b|\bjust the letter\b",
    re.I)
# Arithmetic: an expression, or a number with an operation in words.
_ARITHMETIC = re.compile(
    rf"{_NUMBER}\s*(?:[-+*/×÷^x%]|\*\*)\s*\(?{_NUMBER}|\(\s*{_NUMBER}\s*[-+*/×÷^]"
    rf"|{_NUMBER}\s*choose\s*{_NUMBER}|\bround(?:ed)?\b[^.?!\n]{{0,20}}{_NUMBER}[^.?!\n]{{0,30}}"
    rf"\b(?:decimal|places?|nearest|significant)\b"
    rf"|{_NUMBER}\s*(?:plus|minus|times|divided by|multiplied by|over|squared|cubed|factorial|!|% of|percent of|"
    rf"to the (?:power|\d+\w*)|mod(?:ulo)?)\b"
    rf"|\b(?:square root|cube root|log(?:arithm)?|factorial|gcd|lcm|greatest common|least common|sum|product|"
    rf"average|mean|median|remainder)\b[^.?!\n]{{0,30}}{_NUMBER}"
    rf"|\b(?:what|which) (?:percent|percentage|fraction)\b|\bsolve (?:for|the equation)?\b[^.?!\n]*=",
    re.I)
# A unit conversion: "convert 5 miles to km", "how many ounces in a pound", "72 kg in pounds".
_CONVERSION = re.compile(
    rf"^\W*convert\b[^.?!\n]*{_NUMBER}|^\W*convert\b[^.?!\n]*\bto\b"
    rf"|\bhow many {_UNITS}\b[^.?!\n]{{0,20}}\b(?:in|per|are in|make)\b"
    rf"|{_NUMBER}\s*{_UNITS}\s+(?:in|to|into|as)\s+{_UNITS}\b"
    rf"|{_NUMBER}\s*{_UNITS}\s+(?:is|are|equals?|makes?)\s+how many\s+{_UNITS}\b",
    re.I)
# A question after one fact, a quantity or a name: "What is the capital of ...", "Who wrote ...",
# "How many ...", "When did ...", "Which planet ...", "Is 91 divisible by 7?".
_FACT = re.compile(
    r"^\W*(?:(?:at|in|on|by|to|for|from|roughly|approximately|about|exactly)\s+)?"
    r"(?:what(?:'s| is| was| were)? (?:the |his |her |its |their )(?!best\b)\w+"
    r"|what(?: \w+)? (?:year|day|date|time|color|colour|number|percent|place|country|city|language|element|"
    r"planet|century|decade|temperature|speed|age|size|height|altitude|distance|weight|price)\b"
    r"|(?:in )?what year\b|who(?:se)? (?!are you\b)(?:\w+)|when (?:did|was|is|were|does|will)\b"
    r"|where (?:is|was|are|did|does)\b|which\b|how (?:many|much|tall|far|long|old|big|heavy|fast|high|deep|wide|large|"
    r"often)\b|(?:is|are|was|does|do|can)\b[^?\n]*\d)",
    re.I)
# The last sentence of a word problem: a quantity asked after the facts are given.
_PROBLEM = re.compile(
    r"\bhow (?:many|much|long|far|old|fast|tall)\b|\bwhat(?: is| was| will be| are|'s)\b|\bwhat (?:percent|percentage|"
    r"fraction|place|number|time)\b|\bwhat do(?:es)? (?:i|we|you|he|she|they|it) (?:pay|owe|get|earn|save|spend|need|"
    r"make|weigh)\b|^\W*(?:if\b.*,\s*)?(?:calculate|compute|find|evaluate|simplify|determine|express|"
    r"solve|give|which|who|when)\b",
    re.I)
_HOW_MANY = re.compile(r"^\W*(?:how many|how much)\b[^\n]*\?\W*$", re.I)
# A one-sentence word problem: the facts with a number, then after the last comma a quantity asked
# (`_PROBLEM`): "If a shirt costs $40 and is 25% off, what is the sale price?"
_IF_PROBLEM = re.compile(r"^\W*if\b[^?\n]*\d[^?\n]*,\s*([^,?\n]*\?)\W*$", re.I)
# A quantity asked in words where the facts give no number ("What is the probability that Alice wins?").
_QUANTITY_ASKED = re.compile(
    r"\bwhat is the (?:probability|(?:minimum|maximum|smallest|largest|least|greatest) (?:possible )?"
    r"(?:number|value|integer|positive))\b",
    re.I)
# A one-sentence problem with no "if": two numbers, then after the last comma a quantity asked in at most
# ten words, with or without a question mark ("my car does 32 mpg and gas is $3.50, how much does a 240 mile
# trip cost").
_ASKED_AFTER = re.compile(r"^[^?\n]*\d[^?\n]*\d[^?\n]*,\s*((?:\S+\s+){0,9}\S+?)\??\W*$")
# A fact asked of a thing, in a few words: "capital of canada?", "population of Tokyo?".
_FACT_OF = re.compile(
    r"^\W*(?:the\s+)?(?:capital|population|currency|area|height|length|distance|diameter|mass|weight|speed|age|"
    r"author|inventor|founder|president|prime minister|ceo|boiling point|melting point|freezing point|atomic number|"
    r"chemical symbol|square root|value|price|date|year|language|timezone|time zone) of\b[^.?!\n]{1,40}\?\W*$",
    re.I)
# A yes/no question of fact, in one short sentence ("Does water expand when it freezes?"); not a request put
# as a question ("Can you ...", "Is there a way to ..."), nor one asking a judgement ("Is it worth ...").
_YES_NO_QUESTION = re.compile(
    r"^\W*(?:is|are|was|were|does|did|can|has|have)\s+(?!(?:you|i|we|there|it (?:worth|possible|ok|okay|a good|"
    r"bad|better|normal|safe|wise|smart))\b)[^?\n]{3,80}\?\W*$",
    re.I)
_JUDGEMENT = re.compile(r"\b(?:worth|good|bad|better|best|worse|worst|healthy|unhealthy|harmful|dangerous|ethical|"
                        r"moral|fair|should|recommend|prefer|think|opinion|feel|believe)\b", re.I)
_LATEX = re.compile(r"\$[^$\n]*[\\^_=+<>{}\d][^$\n]*\$|\\\[|\\\(|\\frac|\\sqrt")
_SENTENCES = re.compile(r"(?<=[.?!])\s+(?=\S)")


_YES_NO_ASKED = re.compile(
    r"\byes\W{0,3}(?:or|/)\W{0,3}no\b|^\W*(?:is|are|was|were|does|do|did|can|could|will|would|has|have|had|should)\b",
    re.I)
_YES_NO = {"true": "yes", "false": "no", "yes": "yes", "no": "no"}
_SAYS_YES_OR_NO = re.compile(r"\byes\W{0,3}(?:or|/)\W{0,3}no\b", re.I)
# A reply that opens with its verdict and then explains it: "Yes, 221 is a prime number."
_OPENS_WITH_VERDICT = re.compile(r"^\W*(yes|no)\b\W*(?:[,.;:!\u2014-]|$)", re.I)


def yes_no_form(answer: str, question: str) -> str:
    """"yes" or "no" for an answer that says so (True, false, "Yes.", **No**) to a question that
    asks yes or no (in so many words, or as a question opening with is, does, can, ...); where
    the question says "yes or no" in so many words, also for an answer that opens with its
    verdict ("Yes, 221 is ..." -> "yes"); `answer` unchanged otherwise."""
    said = _YES_NO.get(answer.strip().strip("*_`.!\"'").strip().lower())
    if said is not None and _YES_NO_ASKED.search(question):
        return said
    opening = _OPENS_WITH_VERDICT.match(answer)
    if opening and _SAYS_YES_OR_NO.search(question):
        return opening.group(1).lower()
    return answer


class ShortAnswer(AnswerKind):
    """A short answer whose form the question does not state: read kind-free. Its `detect` is
    the short path's cues (registry.detect tries them after the kinds that state a form and
    after free-form's cues; a request no cue claims gets a whole answer)."""

    name = "short"
    summary = "a short answer the question does not give a form for (read kind-free)"
    priority = 80

    def detect(self, task: str) -> bool:
        """Whether `task` clearly asks for a short value: it says so (yes or no, one word, a
        letter among options), it is arithmetic or a unit conversion, or it is a question after
        one fact or a quantity, as a single short sentence or as the last sentence of a word
        problem that gives numbers (or LaTeX)."""
        text = task.strip()
        if not text:
            return False
        if _STATED.search(text) or _CONVERSION.search(text):
            return True
        sentences = _SENTENCES.split(text)
        words = len(text.split())
        if words <= 25 and len(sentences) <= 2 and _ARITHMETIC.search(text):
            return True
        if len(sentences) == 1 and (words <= 16 or _HOW_MANY.match(text)) and _FACT.search(text):
            return True
        if len(sentences) == 1 and (_FACT_OF.match(text) or words <= 12 and _YES_NO_QUESTION.match(text)
                                    and not _JUDGEMENT.search(text)):
            return True
        asked_after = _ASKED_AFTER.match(text) if len(sentences) == 1 else None
        if asked_after and _PROBLEM.search(asked_after.group(1)):
            return True
        problem = _IF_PROBLEM.match(text)
        if len(sentences) == 1 and (problem and _PROBLEM.search(problem.group(1))
                                    or words <= 25 and _QUANTITY_ASKED.search(text)):
            return True
        if _LATEX.search(text):  # mathematics written in LaTeX: a problem to solve
            return True
        numbered = bool(re.search(rf"\d|\b{_WORDS}\b", text, re.I) or _QUANTITY_ASKED.search(text))
        asked = [s for s in sentences if s.rstrip().endswith("?")] + sentences[-1:]
        return len(sentences) > 1 and numbered and any(_PROBLEM.search(s) for s in asked)

    def as_asked(self, answer: str, question: str) -> str:
        return yes_no_form(answer, question)


class Marked(AnswerKind):
    """A short value of a stated form, read by its scorer's reader: the question's wording
    (`hint`) asks for it, `reader` reads a reply, `finder` gives it as the reply writes it
    (what `ask` prints), `scorer` grades it (tasks/answers.py, tasks/scoring.py)."""

    def __init__(self, name: str, summary: str, reader: Callable[[str], FinalAnswer | None],
                 scorer: Callable[[str, Any], float], finder: Callable[[str], str | None] | None = None,
                 hint: str | None = None, priority: int = 50, reader_weights: str = "answer") -> None:
        self.name, self.summary, self.priority, self.reader_weights = name, summary, priority, reader_weights
        self.hint = re.compile(hint, re.I) if hint is not None else None
        self.reader, self.scorer, self.finder = reader, scorer, finder

    def as_asked(self, answer: str, question: str) -> str:
        return yes_no_form(answer, question)

    def detect(self, task: str) -> bool:
        return self.hint is not None and bool(self.hint.search(task))

    def read(self, reply: str) -> FinalAnswer | None:
        return self.reader(reply)

    def gives_answer(self, reply: str) -> bool:
        return self.read(reply) is not None

    def found(self, text: str) -> str | None:
        return self.finder(text) if self.finder is not None else None

    def score(self, output: str, reference: Any) -> float:
        return self.scorer(output, reference)


_LANGUAGES = (r"(?:python|javascript|js|typescript|java|c\+\+|c#|c|go|golang|rust|ruby|php|bash|shell|sql|swift|"
              r"kotlin|haskell|scala|perl|lua|r|matlab|julia|powershell)")


class Code(AnswerKind):
    """A program, judged by running it: against the task's shown examples on every answer
    (turns/settle.py), read or tested by a Verifier shown it."""

    name, priority, reader_weights = "code", 10, "code"
    settles = "judged"
    summary = "a Python function or program (MBPP, HumanEval), run against the task's shown examples"
    retry_from_task_alone = True
    failed_check_override = "the proposed code failed its examples: verifier acts as worker, alone"
    passing_checks_settle = True
    _last_step = ("Reply with the complete code the task asks for, in one ```python block that defines it: "
                  "not a description of earlier steps' code.")
    _hint = re.compile(
        rf"```python|\b{_LANGUAGES} (?:function|script|program|class|method|snippet|one-liner|interface|struct|"
        rf"enum)s?\b"
        rf"|\b(?:a|an)\s+(?:function|method|class|script|program)\b[^.?!\n]{{0,12}}\bin {_LANGUAGES}\b"
        rf"|\b(?:dockerfile|makefile|docker-compose(?:\.ya?ml)? file)\b"
        rf"|\b(?:write|give|show|need|want)\b[^.?!\n]{{0,20}}\b{_LANGUAGES} code\b"
        rf"|\b(?:write|create|implement|code|give me|show me|generate)\s+(?:me\s+)?(?:a|an|the|some)\s+"
        rf"(?:[\w-]+\s+){{0,2}}(?:function|class|method|regex|regular expression|sql query|sql statement|query|"
        rf"one-liner|unit tests?|program)\b(?! (?:for|of|about) (?:a|an|the|my|our)\b)"
        rf"|\bwrite (?:some |the )?code\b|^\W*(?:implement|code)\b[^.?!\n]*\b(?:in|using) {_LANGUAGES}\b"
        rf"|^\W*implement\b[^.?!\n]*\b(?:algorithm|search|sort|function|class|stack|queue|tree|list|cache)\b"
        rf"|^\W*(?:fix|debug|refactor|optimi[sz]e)\b[^\n]{{0,20}}\bcode\b",
        re.I)

    # A piece of writing whose subject is a program ("Write an angry rap bash script that ..."), an
    # explanation of code shown ("Try to explain what this function does: ```python ...").
    _not_code = re.compile(
        r"^\W*(?:write|compose)\s+(?:me\s+)?(?:a|an)\s+(?:[\w-]+\s+){0,2}(?:rap|poem|song|haiku|limerick|story|"
        r"essay|sonnet|joke)\b|^\W*(?:(?:try to|can you|please)\s+)?(?:explain|describe|summari[sz]e)\b",
        re.I)

    def detect(self, task: str) -> bool:
        """Whether `task` asks for a program (`_hint`), and is not writing about one (`_not_code`)
        nor a request whose response is judged as writing (freeform.states_response_rules)."""
        return bool(self._hint.search(task)) and not self._not_code.search(task) \
            and not states_response_rules(task)

    def last_step_note(self, style: str) -> str:
        """A `program` member's step is a program already: it is told nothing more."""
        return "" if style == "program" else self._last_step

    def read(self, reply: str) -> None:
        return None  # programs are compared by running them, not by reading

    def vote_key(self, answer: str, reference: Any = None) -> str | None:
        """The code itself, blank lines and trailing spaces aside: equal programs vote together."""
        entry = reference.get("entry_point") if isinstance(reference, dict) else None
        code = extract_code(answer, entry)
        return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip()) or None

    def gives_answer(self, reply: str) -> bool:
        return defines_code(reply)

    def answer_text(self, text: str, printed: str | None = None) -> str:
        return extract_code(text).strip("\n")

    def score(self, output: str, reference: Any) -> float:
        return score_code(output, reference)

    def checks(self, task: str, reference: Any = None) -> Examples | None:
        """A scored item's shown examples (its reference's "examples"), else the asserts and
        `>>>` lines the question shows (tasks/doctests.py); None when there are none."""
        if reference is not None:
            return Examples.from_reference(reference)
        source = examples_in_text(task)
        return Examples(source) if source else None


SHORT, CODE = ShortAnswer(), Code()
NUMERIC = Marked("numeric", "a number (GSM8K); asked for by 'Answer: <number>'", number_answer,
                 scoring.score_numeric, number_text, r"answer:\s*<number>", priority=40)
CHOICE = Marked("choice", "a choice letter A-E (ARC, MMLU); asked for by lettered options", choice_answer,
                scoring.score_choice, extract_choice, r"answer:\s*<letter>|\n\s*\(?[B-E][.)]\s", priority=20,
                reader_weights="choice")
MATH = Marked("math", "a LaTeX answer compared by equivalence (MATH-500); asked for by \\boxed", math_answer,
              scoring.score_math, extract_math_answer, r"\\boxed", priority=30)
EXACT = Marked("exact", "a short text compared after normalising case, spaces and outer punctuation", exact_answer,
               scoring.score_exact)
