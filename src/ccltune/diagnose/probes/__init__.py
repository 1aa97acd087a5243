"""Everything that looks at this machine: files under a root, NVML, nvidia-smi, amd-smi, runs and
measurements. What they return is judged in ``diagnose.checks``."""
