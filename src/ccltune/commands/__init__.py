"""The commands beneath both front ends: for each, a frozen options dataclass and a
``run_<command>(options) -> Result`` that checks, runs and returns what it made, printing only to
the stream it is given. The CLI (``ccltune.cli``: argv -> options, result -> exit code) and the
Python API (``ccltune.api``: keywords -> options, result returned) are two thin front ends over them.
``options`` holds what every command's options share (keywords, argv for a job's workers)."""
