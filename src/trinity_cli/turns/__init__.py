"""What one turn is made of: prompts.py (role prompts, message layout, verdict parsing,
PROMPT_VERSION), program.py (a `program` member's Python run in the sandbox), settle.py (votes,
agreement, code answers run against the task's shown examples), answer_text.py (the answer
alone). No model calls here: the episode loop makes them."""
