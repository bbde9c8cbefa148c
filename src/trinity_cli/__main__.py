"""`python -m trinity_cli`: run the CLI (entry.py)."""

from trinity_cli.entry import main

main()
