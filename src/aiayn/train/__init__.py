"""Training (section 5): loss, learning-rate schedule, checkpoints and the training loop."""
