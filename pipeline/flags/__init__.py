"""The command-line flags, grouped by subject (standard library only, so the parser stays cheap)."""
