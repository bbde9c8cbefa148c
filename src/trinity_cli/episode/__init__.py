"""The turn engine: loop.py plays one multi-turn episode (decide -> prompt -> call -> record),
schedules.py holds the fixed decision sources that stand in for a head (single, self-loop, sc,
agree)."""
