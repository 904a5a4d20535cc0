"""An endless stream of this rank's batches with a resumable position (epoch, index).

`TokenBatchSampler.batches(epoch)` is deterministic in (seed, epoch, rank, world_size), so the
position alone recovers exactly where a run stopped: resuming at (epoch, index) yields the batches
the uninterrupted run would have taken next.
"""

from __future__ import annotations

from aiayn.errors import AiaynError


class BatchStream:
    def __init__(self, sampler, epoch: int = 0, index: int = 0):
        self.sampler = sampler
        self.epoch, self.index = epoch, index
        self._batches = sampler.batches(epoch)
        if not self._batches:
            raise AiaynError("the training split yields no batches (is it empty, or max_tokens too small?)")

    @property
    def epochs_done(self) -> int:
        """Whole epochs consumed so far (the current one counts once all its batches are taken)."""
        return self.epoch + (self.index >= len(self._batches))

    @property
    def position(self) -> tuple[int, int]:
        return self.epoch, self.index

    def next(self) -> list[int]:
        """The next batch's example indices, crossing into the next epoch when one ends."""
        if self.index >= len(self._batches):
            self.epoch, self.index = self.epoch + 1, 0
            self._batches = self.sampler.batches(self.epoch)
        batch = self._batches[self.index]
        self.index += 1
        return batch
