"""Run untrusted Python: sandbox.py runs a program (bubblewrap where it can, resource limits
always), isolation.py builds and probes the bubblewrap jail, limits.py sets and polices the limits,
cgroups.py gives each run a cgroup of its own (the kernel's caps, and the way to end all of it),
recorded.py answers a run made before from the sandbox-run cache. Needs only errors, paths and
keyed_cache: model-written code never runs in-process."""
