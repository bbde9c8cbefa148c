"""What plays an episode: a policy (a head, a fixed schedule such as `agree`, the conductor)
behind one protocol (base.py), found by name in one registry (registry.py)."""
