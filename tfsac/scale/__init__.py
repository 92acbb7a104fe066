"""Scale-out on Ray: env runners collecting for one learner, and sweeps of runs on Ray Tune."""
