"""Decontaminate: match tasks against benchmark sets (HumanEval bundled, user sets)."""
