"""`trinity evolve`: options.py (EvolveOptions, validation, resume, the config hash),
evolution.py (the loop, checkpoints, the head it writes) and strategy.py (separable CMA-ES, its
random stream, fitness, curves)."""
