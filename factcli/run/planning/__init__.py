"""What a run will do, before any call: its steps, each row's vars and prompt, the conversations
that order rows, the checks before any call (preflight) and the dry run's estimate."""
