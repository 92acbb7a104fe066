"""Scale-out on Ray: env runners that collect for one learner, and sweeps of whole runs on
Ray Tune."""
