"""The algorithm: SAC's update and its variants, the losses, the TanhNormal policy
distribution, the Keras networks and the compiled learner. Knows nothing of envs or files."""
