"""`python -m trinity_cli`: run the CLI (cli.py)."""

from trinity_cli.cli import main

main()
