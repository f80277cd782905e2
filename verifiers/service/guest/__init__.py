"""Programs that run inside the sandbox for the service (standard library only)."""
