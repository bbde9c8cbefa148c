"""trinity-cli: a small evolved coordinator that turns a pool of language models into one."""

__version__ = "0.1.0"
