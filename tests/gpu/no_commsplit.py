"""Worker script for the GPU tier: one `ccltune bench` command line under torchrun with the NCCL library's
ncclCommSplit hidden, so the nccl engine makes each NCCL_TESTS_SPLIT group's communicator from the group's
own unique id (its path for NCCL < 2.18 and for libraries without ncclCommSplit).

    NCCL_TESTS_SPLIT="MOD 2" python -m torch.distributed.run --standalone --nproc-per-node=4 no_commsplit.py bench ...
"""

from __future__ import annotations

import sys

from ccltune.cli import main
from ccltune.engines.nccl_lib import NcclLib

if __name__ == "__main__":
    has = NcclLib.has
    NcclLib.has = lambda self, name: name != "ncclCommSplit" and has(self, name)  # type: ignore[method-assign]
    sys.exit(main(sys.argv[1:]))
