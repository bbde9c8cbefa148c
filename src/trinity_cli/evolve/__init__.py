"""`trinity evolve`: settings.py (its options as one table: each mode's defaults, checks),
command.py (the command as one call), recipe.py and reader_recipe.py (the one-command runs),
options.py (EvolveOptions, validation, resume, the config hash), evolution.py (the loop,
checkpoints, the head it writes), strategy.py (separable CMA-ES, its random stream, fitness,
curves), input_fit.py (the head input's centre and projection), label_fit.py and
rotation_fit.py (starting heads fitted to a sample matrix), reader_fit.py (a reader's search),
cost.py (a run's cost foretold)."""
