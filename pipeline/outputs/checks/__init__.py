"""The data-quality suites (Great Expectations) of a curate output and their runner."""
