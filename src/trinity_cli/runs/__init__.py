"""The run store and what it holds: store.py (run directories: listed, allocated, loaded, locked),
run_files.py (the files of one run, checkpoints included), selection.py (the share of turns each
member and role got), reports.py (Markdown and JSON renderings of bench and evolve results),
charts.py (their PNG charts)."""
