"""The ``repo`` family: a repository snapshot, a problem statement and the tests that judge it."""
