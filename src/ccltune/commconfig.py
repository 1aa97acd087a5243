"""One configuration of a communicator: what a sweep candidate, a validate arm, a replay arm and a
bench run with --algo/--proto/--channels force, and the ``config`` column's label of its rows.

All fields left at their defaults is NCCL's own choice (:data:`BASELINE`). The nccl engine makes one
communicator per configuration (engines/nccl.py); rule derivation (tune/derive.py) reads the
configuration of a row back from its ``algo``/``proto``/``channels`` columns.
"""

from __future__ import annotations

from dataclasses import dataclass

TWIN_LABEL = "default-twin"


@dataclass(frozen=True)
class CommConfig:
    """How a communicator is made. ``None`` fields are left to NCCL; all ``None`` is NCCL's default."""

    algo: str | None = None
    proto: str | None = None
    channels: int | None = None      # via the plugin (or min/maxCTAs without it)
    twin: bool = False               # NCCL's default again, on a second communicator (sweep's A/A control,
                                     # never a rule)
    rules_file: str | None = None    # tuned rules for the plugin (validate's and replay's rules arm)
    align: bool = False              # the one-channel communicator that lines ranks up (never measured)
    instance: int = 0                # replay: one communicator per captured communicator (same label)

    @property
    def is_default(self) -> bool:
        return (self.algo is None and self.proto is None and self.channels is None and not self.twin
                and not self.rules_file and not self.align)

    @property
    def label(self) -> str:
        """The ``config`` column's spelling: 'default', 'ring/ll128/16', 'default/default/8',
        'default-twin', 'rules', 'align'."""
        if self.align:
            return "align"
        if self.twin:
            return TWIN_LABEL
        if self.rules_file:
            return "rules"
        if not (self.algo or self.proto or self.channels):
            return "default"
        return f"{self.algo or 'default'}/{self.proto or 'default'}/{self.channels or 'default'}".lower()

    def sort_key(self) -> tuple[str, str, int]:
        return (self.algo or "", self.proto or "", self.channels or 0)


BASELINE = CommConfig()  # sets nothing: NCCL chooses; what every candidate is compared with
TWIN = CommConfig(twin=True)
ALIGN = CommConfig(align=True)
