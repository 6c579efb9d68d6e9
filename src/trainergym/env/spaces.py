"""The env's text spaces, and how Gymnasium's process-based vector env carries them.

`AsyncVectorEnv` (`gym.make_vec(..., vectorization_mode="async")`) sends observations back
through shared memory by default. For a stock `Text` space that cannot work: it reads the shared
buffer into strings once, when the vector env is built, so every later observation came back as
that first read (`'0' * 1_000_000`, the buffer's zeros as the charset's first character), and it
can only hold the space's charset. Gymnasium's shared-memory functions dispatch on the space's
type, so `AnyText` registers its own: each env's slot holds a length and the text's code points,
and the reader is a live view that decodes a slot when it is read (a copy, the vector env's
default `copy=True`, is a plain tuple of strings).
"""

from __future__ import annotations

import multiprocessing as mp
import string
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory


class AnyText(spaces.Text):
    """A Text space holding any string up to `max_length` (tool output is arbitrary text);
    samples are drawn from printable ASCII."""

    def __init__(self, max_length: int = 1_000_000, seed: int | None = None):
        super().__init__(max_length=max_length, min_length=0, charset=string.printable, seed=seed)

    def contains(self, x: Any) -> bool:
        """Any string within `max_length`, whatever its characters."""
        return isinstance(x, str) and len(x) <= self.max_length


class SharedTexts(Sequence[str]):
    """The `n` texts in a shared buffer (one slot of `1 + max_length` int32 per env: the length,
    then the code points), decoded whenever read, so the view always shows the latest step."""

    def __init__(self, shared_memory, n: int, max_length: int):
        self._memory, self._n, self._slot = shared_memory, n, max_length + 1

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(self._n)))
        if not -self._n <= index < self._n:
            raise IndexError(index)
        data = np.frombuffer(self._memory.get_obj(), dtype=np.int32)
        start = (index % self._n) * self._slot
        length = int(data[start])
        return data[start + 1:start + 1 + length].tobytes().decode("utf-32-le", errors="surrogatepass")

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(self._n))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __deepcopy__(self, memo) -> tuple[str, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@create_shared_memory.register(AnyText)
def _create(space: AnyText, n: int = 1, ctx: ModuleType = mp):
    return ctx.Array(np.dtype(np.int32).char, n * (space.max_length + 1))


@write_to_shared_memory.register(AnyText)
def _write(space: AnyText, index: int, value: str, shared_memory) -> None:
    codes = np.frombuffer(value.encode("utf-32-le", errors="surrogatepass"), dtype=np.int32)
    if len(codes) > space.max_length:
        raise ValueError(f"a text of {len(codes)} characters does not fit the space's {space.max_length}")
    data = np.frombuffer(shared_memory.get_obj(), dtype=np.int32)
    start = index * (space.max_length + 1)
    data[start] = len(codes)
    data[start + 1:start + 1 + len(codes)] = codes


@read_from_shared_memory.register(AnyText)
def _read(space: AnyText, shared_memory, n: int = 1) -> SharedTexts:
    return SharedTexts(shared_memory, n, space.max_length)
