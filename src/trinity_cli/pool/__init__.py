"""The pool of models: pool.py (member name -> backend, lazy loading, memory-aware eviction,
single flight; open_pool) and rollout_cache.py (every reply, keyed on what produced it)."""
