"""The pipeline's stages (Beam transforms) and the plain functions they wrap."""

from tasksieve.transforms.runtime.omp_env import prefer_passive_waits

prefer_passive_waits()  # before any stage imports torch: see tasksieve.transforms.runtime.omp_env
