"""Diagnose: what limits collectives on this machine, and pass/fail gates.

- ``links``/``linkmath``: per GPU pair bandwidth and latency (measured), slowest-link analysis (pure).
- ``topo``/``smitopo``/``amdsysfs``: how GPUs are connected (NVML, ``nvidia-smi topo -m``, AMD sysfs).
- ``sysconf``/``envrules``: host settings and NCCL variables that hurt.
- ``ncclog``/``logcheck``: an NCCL/RCCL INFO log parsed, and the findings drawn from it.
- ``benchrun``: ``ccltune bench`` run through torchrun in a subprocess.
- ``doctor``: all of the above as one list of findings.
- ``profiles``/``gates``/``junit``: ``ccltune check``'s platform gates and their CI outputs.
- ``findings``/``record``: the PASS/WARN/FAIL/WAIVED/ERROR vocabulary and where results are written.
"""
