"""Curate flags shared by tests whose subject is not the evaluation-reliability detectors.

Mutation testing and differential testing run every task's reference and mutants many times
(the API family starts moto for each run), which multiplies the cost of a curate run. Tests
of other features (catalog, checks, reports, rewards, indexes, isolation) turn both detectors
off; the end-to-end test (tests/pipeline/test_curate.py), the stage tests and the labelled-set
benchmark test keep them on.
"""

FAST: tuple[str, ...] = ("--no-weak-tests", "--no-ambiguity")
