"""``tasksieve train``: GRPO on curated shards with TRL, rewarded by the family verifiers.

The package's top level imports nothing: ``pipeline.train.cli`` (flags, standard library only)
is read when the parser is built; TRL, torch and datasets come in when the command runs.
"""
