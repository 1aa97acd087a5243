"""The A/B validation verdict (NCCL default vs rules) and its JSON/JUnit writers. Pure."""
