"""The pipeline's stages (Beam transforms) and the plain functions they wrap."""

from transforms.omp_env import prefer_passive_waits

prefer_passive_waits()  # before any stage imports torch: see transforms.omp_env
