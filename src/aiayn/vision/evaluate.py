"""Accuracy and loss of an image classifier over a whole split, in batches, without gradients."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from aiayn.train.loss import label_smoothed_nll
from aiayn.vision.data import to_tensor


@torch.no_grad()
def evaluate(
    model: nn.Module, images: np.ndarray, labels: np.ndarray, batch_size: int = 1000
) -> tuple[float, float]:
    """images (n, H, W) uint8, labels (n,) -> (mean negative log-likelihood, accuracy); in eval mode."""
    model.eval()
    device = next(model.parameters()).device
    nll_sum, correct = 0.0, 0
    for start in range(0, len(images), batch_size):
        x = to_tensor(images[start : start + batch_size]).to(device)  # (batch, C, H, W)
        y = torch.from_numpy(labels[start : start + batch_size]).to(device)  # (batch,)
        logits = model(x)  # (batch, n_classes)
        nll_sum += label_smoothed_nll(logits, y, 0.0, ignore_index=-1)[1].item()
        correct += int((logits.argmax(-1) == y).sum())
    n = max(len(images), 1)
    return nll_sum / n, correct / n
