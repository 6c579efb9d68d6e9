"""The weights the runner scores are the ones it saw the run publish.

Training code publishes `broadcasts/step_N/` and marks it complete with a STABLE file (prime-rl's
filesystem weight broadcast). That code is the job's: it could publish one model and then, while
training goes on, swap another into the same directory (weights brought from elsewhere), or
publish a link that points out of the run. The runner fingerprints each step the moment it sees
it published (every heartbeat of the train phase, and once more when the phase's processes are
gone) and, before scoring, refuses a checkpoint it never saw, one whose files changed since, or
one holding anything but regular files and directories.

A fingerprint reads a file whole up to `WHOLE_BYTES`; of a larger file (a model's shards), its
size, head, tail and `BLOCKS` blocks at offsets drawn from a secret of this ledger, which the
trainer (another uid, or another PID namespace) cannot read: a few MiB per shard, however large
the model, and no swap the trainer cannot see coming gets past it unless it keeps those blocks.
"""

from __future__ import annotations

import hashlib
import os
import random
import secrets
import stat
from pathlib import Path

WHOLE_BYTES = 64 << 20
BLOCK_BYTES, BLOCKS = 64 << 10, 64


class CheckpointRefused(Exception):
    """The checkpoint to score is not the one the run was seen to publish (the message says how)."""


class Ledger:
    """The steps a run published, each with its fingerprint when first seen."""

    def __init__(self, outputs: Path, max_steps: int):
        self.outputs, self.max_steps = Path(outputs), max_steps
        self._key = secrets.token_bytes(32)
        self.seen: dict[Path, str | None] = {}  # step directory -> fingerprint (None: not regular files)

    def published(self) -> list[Path]:
        """Complete steps of the run (`broadcasts/step_N/STABLE`, N <= max_steps), oldest first; a
        `step_999` made up, or a linked directory, is not the trained model."""
        if not self.outputs.is_dir():
            return []
        steps = [p for p in self.outputs.rglob("step_*") if p.parent.name == "broadcasts" and not p.is_symlink()
                 and p.name[5:].isdigit() and int(p.name[5:]) <= self.max_steps and (p / "STABLE").is_file()]
        return sorted(steps, key=lambda p: int(p.name[5:]))

    def watch(self) -> None:
        """Fingerprint every step published since the last look."""
        for step in self.published():
            if step not in self.seen:
                self.seen[step] = self.fingerprint(step)

    def verified(self) -> Path:
        """The last step published, checked against its first fingerprint. Raises LookupError when
        there is none, CheckpointRefused when it is not what was published."""
        self.watch()  # what was published in the phase's last moments: the trainer is gone by now
        steps = self.published()
        if not steps:
            raise LookupError("training ended without publishing weights")
        last = steps[-1]
        first, now = self.seen[last], self.fingerprint(last)
        if first is None or now is None:
            raise CheckpointRefused(f"{last.name} holds something other than regular files (a link, a device)")
        if now != first:
            raise CheckpointRefused(f"{last.name} changed after it was published")
        return last

    def fingerprint(self, step: Path) -> str | None:
        """A digest of every file under `step` (names, sizes, contents as the docstring says);
        None if it holds a link or anything but regular files and directories."""
        digest = hashlib.blake2b(key=self._key)
        for root, dirs, files in os.walk(step):
            dirs.sort()
            for name in sorted([*dirs, *files]):
                path = os.path.join(root, name)
                info = os.lstat(path)
                if stat.S_ISDIR(info.st_mode):
                    continue
                if not stat.S_ISREG(info.st_mode):
                    return None
                digest.update(f"{os.path.relpath(path, step)}\0{info.st_size}\0".encode())
                with open(path, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as fh:
                    if info.st_size <= WHOLE_BYTES:
                        digest.update(fh.read())
                        continue
                    rng = random.Random(self._key + path.encode())
                    offsets = [0, info.st_size - BLOCK_BYTES, *(rng.randrange(info.st_size - BLOCK_BYTES) for _ in range(BLOCKS))]
                    for offset in offsets:
                        fh.seek(offset)
                        digest.update(fh.read(BLOCK_BYTES))
        return digest.hexdigest()
