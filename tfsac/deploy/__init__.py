"""Deployment: exporting the policy (SavedModel for TF Serving) and loading it back."""
