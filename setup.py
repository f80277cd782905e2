"""Package list for setuptools: every sub-package of the four source folders, under ``tasksieve``.

The folders stay at the top of the repository and ``pyproject.toml`` maps them with
``package-dir``; the list is computed from the real folders (not through the ``tasksieve/``
links of a checkout, which an sdist or a copy may not keep).
"""

from setuptools import find_packages, setup

SOURCES = ("schemas", "verifiers", "transforms", "pipeline")
PACKAGES = ["tasksieve"] + [
    f"tasksieve.{folder}{'.' + sub if sub else ''}"
    for folder in SOURCES
    for sub in ["", *find_packages(folder)]
]

setup(packages=PACKAGES)
