"""Playing batches of episodes behind one interface: local.py (serially or on threads),
ray_actors.py (on Ray actors across a cluster), ray_cache.py (the rollout cache those actors
share)."""
