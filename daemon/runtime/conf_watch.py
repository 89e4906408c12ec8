"""The scheduler configuration in force: loaded from a file (or the bundled default), reloaded
when the file changes; a bad new file is reported and the last good configuration stays.  The
parse itself is the core's (`daemon/scheduler/framework/conf_check.py`; re-exported here).

`poll()` returns the events to record: `ConfigurationRecorded` when the text in force changes
(and once at start when the log does not hold it yet), `ConfigurationRejected` for a bad file
(once per distinct bad content).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from fumarole.daemon.scheduler.framework.conf import SchedulerConf
from fumarole.daemon.scheduler.framework.conf_check import ConfError, parse_scheduler_conf
from fumarole.store.events import ConfigurationRecorded, ConfigurationRejected, Event

__all__ = ["ActiveConf", "ConfError", "ConfWatcher", "bundled_conf_text", "conf_hash", "parse_scheduler_conf"]

log = logging.getLogger("fumarole.conf")

BUNDLED_CONF = "daemon-scheduler.yaml"


def conf_hash(text: str) -> str:
    """The configuration's identity in the log: sha256 hex of its text."""
    return hashlib.sha256(text.encode()).hexdigest()


def bundled_conf_text() -> str:
    return (resources.files("fumarole.daemon") / "examples" / BUNDLED_CONF).read_text()


@dataclass(slots=True)
class ActiveConf:
    conf: SchedulerConf
    text: str
    hash: str
    source: str


class ConfWatcher:
    """Holds the active configuration; `poll()` reloads the file when its content changed."""

    def __init__(self, path: str | None, *, strict: bool = False) -> None:
        self.strict = strict
        self.path = Path(path) if path else None
        self.source = str(self.path) if self.path else f"<bundled {BUNDLED_CONF}>"
        try:
            text = self.path.read_text() if self.path else bundled_conf_text()
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) else f"not UTF-8 text ({e.reason})"
            raise ConfError(f"{self.source}: cannot read the scheduler configuration: {why}") from None
        self.active = ActiveConf(
            parse_scheduler_conf(text, self.source, strict=strict), text, conf_hash(text), self.source
        )
        self._last_seen = self.active.hash
        self._recorded: str | None = None

    def mark_recorded(self, h: str | None) -> None:
        """Tell the watcher which configuration the log already holds as the latest one."""
        self._recorded = h

    def poll(self) -> list[Event]:
        out: list[Event] = []
        if self.path is not None:
            try:
                text = self.path.read_text()
            except OSError as e:
                text = None
                err = f"{self.path}: cannot read: {e.strerror}"
            if text is not None:
                h = conf_hash(text)
                if h != self._last_seen:
                    self._last_seen = h
                    try:
                        conf = parse_scheduler_conf(text, self.source, strict=self.strict)
                    except ConfError as e:
                        log.error("configuration rejected, keeping the last good one: %s", e)
                        out.append(ConfigurationRejected(source=self.source, error=str(e), conf_hash=h))
                    else:
                        log.info("configuration reloaded", extra={"conf_hash": h[:16]})
                        self.active = ActiveConf(conf, text, h, self.source)
            elif self._last_seen != "unreadable":
                self._last_seen = "unreadable"
                log.error("configuration unreadable, keeping the last good one: %s", err)
                out.append(ConfigurationRejected(source=self.source, error=err))
        if self._recorded != self.active.hash:
            out.append(
                ConfigurationRecorded(conf_hash=self.active.hash, text=self.active.text, source=self.source)
            )
            self._recorded = self.active.hash
        return out
