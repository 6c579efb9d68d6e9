"""The string_pipeline eval tool interface as a verifiers v1 `Toolset`.

The trained model sees exactly these tools at eval time (advertised as `text_reverse`, ...).
They are stateless: each takes the current string and returns the transformed one, so a
pipeline is one call per step. A job should wire this class into its own tasks so training
and eval use the same tools.
"""

import verifiers.v1 as vf

from trainergym_string_pipeline import text as ops


class StringPipelineToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = ops.TOOL_PREFIX

    @vf.tool
    def reverse(self, text: str) -> str:
        """Return the text reversed."""
        return ops.reverse(text)

    @vf.tool
    def swapcase(self, text: str) -> str:
        """Return the text with every letter's case swapped."""
        return ops.swapcase(text)

    @vf.tool
    def caesar(self, text: str, shift: int) -> str:
        """Shift each letter forward by `shift` places in the alphabet (wrapping, case kept); other characters stay."""
        return ops.caesar(text, shift)

    @vf.tool
    def rotate(self, text: str, k: int) -> str:
        """Move the first k characters to the end (k wraps around the text's length)."""
        return ops.rotate(text, k)

    @vf.tool
    def replace(self, text: str, old: str, new: str) -> str:
        """Replace every occurrence of `old` with `new`."""
        if not old:
            return "error: old must be a non-empty string"
        return ops.replace(text, old, new)

    @vf.tool
    def take(self, text: str, n: int) -> str:
        """Return the first n characters of the text."""
        return ops.take(text, n)

    @vf.tool
    def drop(self, text: str, n: int) -> str:
        """Return the text without its first n characters."""
        return ops.drop(text, n)

    @vf.tool
    def dedupe(self, text: str) -> str:
        """Remove repeated characters, keeping the first occurrence of each (case-sensitive)."""
        return ops.dedupe(text)


if __name__ == "__main__":
    StringPipelineToolset.run()
