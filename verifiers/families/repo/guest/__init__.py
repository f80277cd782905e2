"""Code that runs inside the sandbox for the repo family (standard library and pytest only)."""
