"""The curate run: its config, the Beam pipeline built from the stages, running it, its summary."""
