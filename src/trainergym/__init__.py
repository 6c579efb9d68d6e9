"""trainergym: writing a reinforcement-learning training job, as a Gymnasium environment.

    import gymnasium as gym
    import trainergym  # registers trainergym/WriteTrainingJob-v0
    env = gym.make("trainergym/WriteTrainingJob-v0")
"""

from trainergym.env.core import ENV_ID, AsyncTrainerEnv, TrainerEnv, register
from trainergym.env.reward import RewardBreakdown
from trainergym.task.spec import TaskSpec, load_task

register()

__all__ = ["ENV_ID", "AsyncTrainerEnv", "TrainerEnv", "RewardBreakdown", "TaskSpec", "load_task", "TrainerTaskset"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # The trainer task as a verifiers taskset, so `vf-eval trainergym` finds it (verifiers'
    # loader takes a package's single exported Taskset); imported lazily: it imports verifiers.
    if name == "TrainerTaskset":
        from trainergym.adapters.verifiers import TrainerTaskset

        return TrainerTaskset
    raise AttributeError(f"module 'trainergym' has no attribute {name!r}")
