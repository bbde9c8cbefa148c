"""The run store and what it holds: store.py (run directories, checkpoints, locks), reports.py
(Markdown and JSON renderings of bench and evolve results), charts.py (their PNG charts)."""
