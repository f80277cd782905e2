"""Repo tasks made from outside sources: synthesis from a local project, imports and exports."""
