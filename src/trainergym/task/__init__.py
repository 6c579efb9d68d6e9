"""What an episode is about, and what it is measured on: a task spec and its family
(`spec`), the hidden evals (`hidden`), the untrained models' baselines (`baselines`).

Zone: the library. Imports nothing of trainergym but `paths`.
"""
