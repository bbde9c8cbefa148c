"""Recordings: model calls carried out of one `TRINITY_HOME` and into another. fileformat.py
(the compressed, append-only file of calls and its checks), transfer.py (export from the
caches, import into them, and what applies to which installed pool), carry.py (run
directories that travel with their calls)."""
