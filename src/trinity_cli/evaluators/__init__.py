"""Playing batches of episodes behind one interface: local.py (serially or on threads),
ray_actors.py (the driver of Ray actors across a cluster), ray_cluster.py (reaching Ray, its options,
what runs on each actor), ray_cache.py (the rollout cache those actors share), choose.py (which of
them plays a command's episodes)."""
