"""The job judge: A/B of a user's own job, whole runs and in-run arms."""
