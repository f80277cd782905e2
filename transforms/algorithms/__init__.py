"""Plain algorithms the stages wrap (no Beam): MinHash, similarity, pass-rate stats, stopping."""
