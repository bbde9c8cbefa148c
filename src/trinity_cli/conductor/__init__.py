"""Conductor mode: workflow.py reads and checks the workflow a model writes (three lists), run.py
plays its steps in dependency order."""
