"""Rows of their own lengths (aiayn.decode.ragged): chunks fed through the decoder against the
teacher-forced pass."""

from __future__ import annotations

import torch

from aiayn.decode.ragged import RaggedDecoder
from aiayn.model.io import load_model_dir


def test_rows_of_their_own_lengths_decode_as_the_teacher_forced_pass(toy_model_dir):
    """Feeding each row's target in chunks of different sizes, rows at different lengths, gives the
    logits of the teacher-forced decoder (the independent reference), position for position."""
    model, _ = load_model_dir(toy_model_dir, "cpu")
    torch.manual_seed(1)
    src = torch.randint(4, model.config.vocab_size, (3, 7))
    src[1, 5:] = model.config.pad_id
    tgt = torch.randint(4, model.config.vocab_size, (3, 9))
    tgt[:, 0] = model.config.start_id
    with torch.inference_mode():
        memory, mask = model.encode(src)
        reference = model.logits(model.decode(tgt, memory, mask))  # (3, 9, vocab)
        rows = RaggedDecoder(model, src, 12)
        got = torch.zeros_like(reference)
        done = torch.zeros(3, dtype=torch.long)
        for sizes in ([1, 2, 3], [3, 1, 1], [2, 3, 2], [3, 3, 3]):
            q = max(sizes)
            index = (done[:, None] + torch.arange(q)).clamp(max=8)  # (3, q)
            logits = rows.extend(tgt.gather(1, index))  # (3, q, vocab)
            for r, size in enumerate(sizes):
                size = min(size, 9 - int(done[r]))
                got[r, done[r] : done[r] + size] = logits[r, :size]
            done = (done + torch.tensor(sizes)).clamp(max=9)
            rows.keep(done.clone())
    torch.testing.assert_close(got, reference, rtol=1e-4, atol=1e-4)
