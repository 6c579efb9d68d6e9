"""String-pipeline training tasks for the string_pipeline eval tools."""

from .pipelines import PipelineTaskset

__all__ = ["PipelineTaskset"]
