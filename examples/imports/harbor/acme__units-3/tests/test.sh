#!/bin/bash
# Runs the task's tests; reward 1 when all pass.
mkdir -p /logs/verifier
cd /workspace || exit 1
if python -m pytest -q tests/test_length.py; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
