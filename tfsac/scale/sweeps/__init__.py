"""Sweeps of tfsac runs on Ray Tune: a grid of training-flag values times seeds, or an Optuna
search with ASHA early stopping; each trial is one ordinary run under the sweep directory."""
