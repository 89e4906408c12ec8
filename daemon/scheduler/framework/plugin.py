"""The plugin contract: a builder takes `arguments` and returns an object with session hooks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.framework.session import Session


class Plugin(Protocol):
    """Registers callbacks with `ssn.register(point, self.name, fn[, batch])` in on_session_open."""

    name: str

    def on_session_open(self, ssn: Session) -> None: ...

    def on_session_close(self, ssn: Session) -> None: ...


PluginBuilder = Callable[[dict[str, Any]], Plugin]


@dataclass(frozen=True, slots=True)
class ValidateResult:
    """JobValid's answer (api.ValidateResult)."""

    passed: bool
    reason: str = ""
    message: str = ""
