"""The DuckDB catalog of a curate output: views, macros and their types."""
