"""The turn engine: turn.py plays one turn (fit the prompt, call, run its code, record it) for
episodes and conductor steps alike, loop.py one multi-turn episode (decide -> turn -> settle),
schedules.py holds the fixed decision sources that stand in for a head (single, self-loop, sc,
agree)."""
