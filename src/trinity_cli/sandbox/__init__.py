"""Run untrusted Python: sandbox.py runs a program (bubblewrap where it can, resource limits
always), isolation.py builds and probes the bubblewrap jail, limits.py sets and polices the limits,
recorded.py answers a run made before from the sandbox-run cache. Needs only errors, paths and
keyed_cache: model-written code never runs in-process."""
