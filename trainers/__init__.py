"""Trainers: the asynchronous decoupled trainer, the synchronous baseline and SFT warm start (arriving with the trainer issue)."""
