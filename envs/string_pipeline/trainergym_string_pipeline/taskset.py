"""string_pipeline as a verifiers v1 taskset: the family's own tasks, tools and checker on the
kit's shell (`trainergym_kit.taskset`).

This is what `vf-eval trainergym-string-pipeline` runs and what the hidden-eval scorer uses on a GPU host.
"""

from trainergym_kit.taskset import ItemTask, ItemTaskset

from trainergym_string_pipeline import items
from trainergym_string_pipeline.toolset import StringPipelineToolset


class StringPipelineTask(ItemTask):
    ITEMS = items
    TOOLSET = StringPipelineToolset


class StringPipelineTaskset(ItemTaskset):
    TASK = StringPipelineTask
    SYSTEM_PROMPT = (
        "You transform strings with text tools. Call one tool per step, passing the previous "
        "step's output as `text`. " + items.ANSWER_FORMAT
    )
