"""Turning measurements into tuner rules: statistics, derivation, rule text, the search
planner and the nccl-tests importer. Pure functions, no GPU."""
