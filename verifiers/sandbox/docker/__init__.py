"""The ``docker`` backend: hardened warm containers, one execution per container at a time."""
