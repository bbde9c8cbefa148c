"""The answer a free-form reply gives, with what is not the answer taken off: what `ask` prints,
`serve` returns, the constraints are checked on and IFEval's checkers score.

A small model asked to revise an answer sometimes copies the transcript it was shown (the
labels `[Worker]`, `Turns so far:`, `Task:`, a Verifier's `Verdict: ...`), titles its answer
"Revised ...", or appends remarks about the revision. `answer_body(reply)`:

1. splits the reply into blocks at lines that are only a transcript label (`LABELS`: `Task:`,
   `Earlier conversation:`, `Turns so far:` with its "(N earlier turns omitted)", `Answer to
   check:`, `Proposed code to check:`, `[Worker]`, `[Verifier]`, `[Thinker]`);
2. drops the copied prompt (`Task:`, `Earlier conversation:` blocks) and the judges' and
   planners' blocks (`[Verifier]`, `[Thinker]`), and keeps the text before the first label when
   there is any, else the last `[Worker]` block, else the first other block with text;
3. in it, cuts from a `Verdict:` line or one of trinity's check notes on ("(trinity checked
   this answer ..."), and from a closing remark about the revision on ("This revised answer
   ...", "Changes made:", "I have revised ...");
4. drops an opening "Here is ...:" / "Sure ...:" / "Revised answer:" line, and the word
   "Revised" from an opening heading ("### Revised Proof by Induction" -> "### Proof by
   Induction").

A reply with none of these is returned stripped and otherwise unchanged. `SCAFFOLDING` is what
must never be left in an answer (tests/test_answer_body.py runs every recorded free-form reply
through `answer_body` and looks for it).
"""

from __future__ import annotations

import re

LABELS = re.compile(
    r"^[ \t]*(?:\*\*)?(?P<label>\[(?:Worker|Verifier|Thinker)\]|Task:|Earlier conversation:|"
    r"Turns so far(?: \(\d+ earlier turns omitted\))?:|Answer to check:|Proposed code to check:)(?:\*\*)?[ \t]*$",
    re.M)
_DROPPED = ("Task:", "Earlier conversation:", "[Verifier]", "[Thinker]")
_CUT = re.compile(
    r"^[ \t]*(?:\*\*)?(?:Verdict:|\(trinity checked this answer)"
    r"|^[ \t]*(?:\*\*)?(?:(?:this|the|my) revised (?:answer|version|response|text)\b|in this revision\b|"
    r"changes made\b|i have (?:revised|corrected|fixed|updated)\b|revisions? made\b)",
    re.M | re.I)
_PREAMBLE = re.compile(
    r"^(?:(?:sure|certainly|of course|here(?:'s| is| are))\b.*:|(?:\*\*)?(?:the )?revised (?:answer|version|response)"
    r"(?:\*\*)?:?(?:\*\*)?)\s*$", re.I)
_REVISED_HEADING = re.compile(r"^(#{1,6}[ \t]+|\*\*)Revised[ \t]+(?=\S)", re.I)

SCAFFOLDING = re.compile(
    r"^[ \t]*\[(?:Worker|Verifier|Thinker)\]|Verdict:|Turns so far|Answer to check:|You revise the latest answer|"
    r"^[ \t]*(?:#{1,6}[ \t]+|\*\*)?Revised\b", re.M | re.I)


def _blocks(text: str) -> list[tuple[str | None, str]]:
    """(label or None, text) of each block, in order (module docstring, step 1)."""
    found = list(LABELS.finditer(text))
    blocks: list[tuple[str | None, str]] = [(None, text[: found[0].start()] if found else text)]
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        label = match.group("label")
        blocks.append(("Turns so far:" if label.startswith("Turns so far") else label, text[match.end():end]))
    return blocks


def _chosen(text: str) -> str:
    blocks = [(label, body.strip()) for label, body in _blocks(text)]
    if len(blocks) == 1:
        return blocks[0][1]
    kept = [(label, body) for label, body in blocks if label not in _DROPPED and body]
    if blocks[0][1]:
        return blocks[0][1]
    workers = [body for label, body in kept if label == "[Worker]"]
    if workers:
        return workers[-1]
    return kept[0][1] if kept else ""


def answer_body(reply: str) -> str:
    """The answer of a free-form reply (module docstring)."""
    text = _chosen(reply.strip())
    cut = _CUT.search(text)
    if cut is not None and text[: cut.start()].strip():
        text = text[: cut.start()].rstrip()
    first, _, rest = text.partition("\n")
    if rest.strip() and _PREAMBLE.match(first.strip()):
        text = rest.strip()
    return _REVISED_HEADING.sub(r"\1", text, count=1)
