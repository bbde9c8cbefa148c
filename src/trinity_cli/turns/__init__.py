"""What one turn is made of: rules.py (which calls answer and which see the task alone),
prompts.py (role prompts, message layout, PROMPT_VERSION), replies.py (a verdict or suggestion
read from a reply), program.py (a `program` member's Python run in the sandbox), settle.py
(votes, agreement, code answers run against the task's shown examples), answer_text.py (the
answer alone). No model calls here: the episode loop makes them."""
