"""What every stage runs on: the element, counters, dead letters, file access, worker sandbox."""
