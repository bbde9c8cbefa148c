"""The coordinator: backbone_refs.py (what a --backbone names), backbone.py (the small causal
LM, transformers), hash_backbone.py (hashed word features), head.py (the linear head),
policy.py (transcript -> text -> feature -> (model, role)), svf.py (singular-value
fine-tuning)."""
