"""A training run: the trainer and its collection sources' interface, checkpoints, the run
directory, evaluation, logs, plots and rendered videos."""
