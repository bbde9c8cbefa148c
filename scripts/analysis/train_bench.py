"""`trinity bench` on training items, to choose a rule of the loop on items that neither
validate nor test anything.

    python scripts/analysis/train_bench.py BENCH-ARGS...

Runs `trinity bench BENCH-ARGS` exactly as the command does, except that `--tasks` may name
train splits (`mbpp:train:32`), which the command refuses because heads are fitted on them: a
head's score there says little about the head, but a rule applied to every head and procedure
alike (how a turn is asked, when an episode ends) may be compared there before it is spent on
validation items. Every call goes through the caches as usual (the training matrix's
question-alone replies replay); the run is saved like any bench run.
"""

from __future__ import annotations

from trinity_cli import tasks
from trinity_cli.bench import options
from trinity_cli.entry import main
from trinity_cli.tasks.mix import MixEntry


def any_split_mix(text: str) -> list[MixEntry]:
    """The mix as `trinity evolve` parses it: every split allowed."""
    return tasks.parse_mix(text)


if __name__ == "__main__":
    options.held_out_mix = any_split_mix  # type: ignore[assignment]
    main()
