"""The Gymnasium environment (`core`): the workspace an agent edits (`workspace`), the tools
it calls (`tools`), how a model message becomes tool calls (`actions`), and the reward
(`reward`).

Zone: the library.
"""

from trainergym.env.core import ENV_ID, AsyncTrainerEnv, TrainerEnv, register

__all__ = ["ENV_ID", "AsyncTrainerEnv", "TrainerEnv", "register"]
