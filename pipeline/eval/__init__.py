"""``tasksieve eval``: measure a model on verifiable tasks, and compare two measurements."""
