"""The coordinator: backbone.py (the small causal LM, transformers), hashing.py (hashed word
features), head.py (the linear head), policy.py (transcript -> text -> feature -> (model, role)),
svf.py (singular-value fine-tuning), input_fit.py (the head input's centre and projection),
label_fit.py (a starting head fitted to free labels)."""
