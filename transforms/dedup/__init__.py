"""ExactDedup and NearDedup, and the near-dedup index of earlier runs."""
