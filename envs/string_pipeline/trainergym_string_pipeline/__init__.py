"""string_pipeline: a trainergym task family and verifiers v1 taskset (see family.py).

The taskset is imported lazily so the library can use the family without importing verifiers.
"""

__all__ = ["StringPipelineTaskset"]


def __getattr__(name: str):
    if name == "StringPipelineTaskset":
        from trainergym_string_pipeline.taskset import StringPipelineTaskset

        return StringPipelineTaskset
    raise AttributeError(name)
