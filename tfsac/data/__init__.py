"""Data: making and checking envs, stepping them (the collector), the replay buffer and the
schedule that says how many updates each env step owes."""
