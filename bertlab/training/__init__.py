"""Training: the optimizer, learning-rate schedules and (later) the training loop."""
