"""Diagnose: what limits collectives on this machine, and pass/fail gates.

- ``probes/``: everything that looks at this machine: host files under a root (``sysfs``), NVML
  (``nvml``), ``nvidia-smi topo -m`` (``smitopo``), ``amd-smi`` (``amdsmi``), AMD sysfs
  (``amdsysfs``), the GPUs and their links from the first of those that answers (``topo``),
  ``ccltune bench`` run under torchrun (``benchrun``), per GPU pair bandwidth measured (``links``).
- ``parsers/`` (pure): NCCL/RCCL INFO logs (``ncclog``, ``rcclog``), link matrices of other tools
  (``nvbandwidth``, ``transferbench``, into ``linkimport``'s rows).
- ``checks/``: the registry (``checks.registry``: one entry per check that ``doctor`` and ``check``
  run) and the checks by concern: host settings (``host``), NCCL variables (``envrules``), GPUs
  (``topo``), an NCCL log (``logcheck``), RCCL on AMD (``rccl``), measured transport and channels
  (``transport``), platform gates (``gates`` over ``profiles``), the slowest link (``linkmath``).
- ``findings``: the PASS/WARN/FAIL/WAIVED/ERROR vocabulary; ``record`` and ``junit``: where
  results are written besides the terminal. The built-in platform profiles are ``profiles/*.toml``.
"""
