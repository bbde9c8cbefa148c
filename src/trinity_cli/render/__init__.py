"""Presentation in the terminal (Rich): terminal.py (turns, tables, replays, error lines; the
consoles), progress.py (long commands' progress on stderr), workflow.py (a conductor's workflow
as a tree)."""
