"""Rollouts: sample, verify and score, one-shot, adaptive and multi-turn; the rollout cache."""
