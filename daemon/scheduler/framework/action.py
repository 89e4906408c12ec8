"""The action contract: `execute(ssn)` runs one step of the scheduling pipeline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.framework.session import Session


class Action(Protocol):
    name: str

    def execute(self, ssn: Session) -> None: ...
