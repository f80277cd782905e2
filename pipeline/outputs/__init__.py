"""What a run leaves: layout, staging and publishing, the DuckDB catalog, the report, the checks."""
