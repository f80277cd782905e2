"""Gates and the evaluation-reliability detectors (test strength, ambiguity) as Beam stages."""
