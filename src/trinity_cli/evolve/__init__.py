"""`trinity evolve`: options.py (EvolveOptions, validation, resume, the config hash),
evolution.py (the loop, checkpoints, the head it writes), strategy.py (separable CMA-ES, its
random stream, fitness, curves), input_fit.py (the head input's centre and projection) and
label_fit.py (a starting head fitted to a sample matrix)."""
