"""Ingest and Validate: find input files, stream their records, parse them into tasks."""
