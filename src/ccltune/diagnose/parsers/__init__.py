"""Other programs' output read into plain records (pure): NCCL/RCCL logs, nvbandwidth, TransferBench."""
