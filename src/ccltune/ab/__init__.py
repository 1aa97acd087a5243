"""ab: judging a job by its own steps (whole-run and in-run arms)."""
