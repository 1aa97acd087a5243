"""Turning measurements into tuner rules: statistics, derivation, rule text, the search
planner. Pure functions, no GPU (nccl-tests' files are read by ccltune.ncclt)."""
