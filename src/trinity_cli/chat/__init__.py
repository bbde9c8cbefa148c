"""`trinity chat`: a conversation at the prompt, its pool loaded once (session.py)."""
