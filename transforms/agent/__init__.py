"""Agent episodes: a policy acting in a live repository workspace over many steps.

``protocol`` parses replies into actions and truncates observations; ``episode`` runs one
episode in one workspace session; ``driver`` runs many at once, batching model calls across
episodes; ``policies`` and ``scripted`` are what acts; ``env`` is the Gym-style API; ``stage``
the Beam stage of ``tasksieve curate --agent``; ``rows`` the trajectory rows it writes.
"""
