"""Data: making, checking and stepping envs, the replay buffers and the update schedule."""
