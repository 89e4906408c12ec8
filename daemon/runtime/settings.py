"""The daemon's own settings: defaults < TOML file (`--config`) < FUMAROLE_* environment < flags.

This is the configuration of the service (where data lives, which adapter, which port), not
the Volcano scheduler configuration (`scheduler_conf`, a Volcano-format YAML file).  Each key
has an environment override named FUMAROLE_<KEY upper-cased> (e.g. FUMAROLE_DATA_DIR,
FUMAROLE_LISTEN, FUMAROLE_API_TOKEN).  Unknown keys and wrong types are errors naming the
file (or variable) and the key.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec


class SettingsError(ValueError):
    """Bad daemon settings; the message names the file or variable and the key."""


class Settings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    data_dir: str = "fumarole-data"
    db: str = ""  # "" = SQLite in data_dir; a postgresql:// URL = the log shared by replicas (FUMAROLE_DB)
    scheduler_conf: str = ""  # "" = the bundled default configuration
    strict: bool = False  # a scheduler configuration warning (unknown plugin, ...) is an error
    adapter: Literal["simulator", "kubernetes"] = "simulator"
    cluster: str = ""  # simulator: cluster manifests ("" = bundled sample)
    workload: str = ""  # simulator: workload file ("" = bundled sample)
    listen: str = "127.0.0.1:8321"
    allow_remote: bool = False  # listening beyond loopback must be asked for
    allowed_hosts: tuple[str, ...] = ()  # Host names the API answers to besides loopback/localhost/listen
    read_token: str = ""  # bearer token every read needs ("" = reads open; FUMAROLE_READ_TOKEN)
    read_token_file: str = ""  # or: a file whose first line is that token (flag --read-token FILE)
    require_read_token: bool = False  # refuse to start without a read token
    serve: bool = False  # keep running (serving the API) after the simulated workload drained
    api: bool = True  # serve the REST API at all
    schedule_period: float = 1.0  # seconds between cycles (virtual seconds with the simulator)
    snapshot_every: int = 50_000  # save a cache snapshot after this many new events
    max_cycles: int = 100_000  # simulator safety horizon: stop with an error past this many cycles
    api_token: str = ""  # bearer token for write endpoints ("" = writes refused)
    max_body_bytes: int = 1_048_576
    jaeger_url: str = "http://localhost:16686"  # the dashboard's cycle pages link to {jaeger_url}/trace/<id>
    live_idle_timeout: float = (
        300.0  # seconds a dashboard's live stream may go without a cycle (0 = no limit)
    )
    live_per_client: int = 8  # live streams one remote address may hold
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["json", "text"] = "text"
    progress_every: float = 1.0  # wall seconds between progress lines
    kubeconfig: str = ""  # kubernetes: kubeconfig file ("" = $KUBECONFIG, ~/.kube/config, or in-cluster)
    scheduler_names: tuple[str, ...] = ("volcano",)  # kubernetes: the pods we schedule (spec.schedulerName)
    kube_concurrency: int = 32  # kubernetes: API calls in flight at first (the adaptive limit starts here)
    kube_concurrency_max: int = 128  # kubernetes: the adaptive limit never goes above this
    leader_elect: bool = True  # kubernetes: hold a coordination.k8s.io Lease to decide (replicas stand by)
    lease_name: str = "fumarole"
    lease_namespace: str = ""  # "" = the pod's namespace in a cluster, else "default"
    lease_duration: float = 15.0  # seconds a standby waits for an unrenewed lease before taking over
    # (kubernetes: the Lease object; a PostgreSQL log: the leadership row of the shared log)
    lease_identity: str = ""  # kubernetes: the Lease holder ("" = HOSTNAME + an id kept in data_dir)

    @property
    def db_path(self) -> Path:
        return Path(self.data_dir) / "fumarole.db"


FIELDS: tuple[str, ...] = Settings.__struct_fields__


def load_settings(
    config_file: str | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Settings:
    """Merge the layers and validate; raises SettingsError with a precise location."""
    merged: dict[str, Any] = {}
    if config_file:
        merged.update(_read_toml(config_file))
    for key in FIELDS:
        var = f"FUMAROLE_{key.upper()}"
        if env is not None and var in env:
            merged[key] = _from_env(var, key, env[var])
    for key, value in (flags or {}).items():
        if value is not None:
            merged[key] = value
    try:
        settings = msgspec.convert(merged, Settings, strict=False)
    except msgspec.ValidationError as e:
        raise SettingsError(f"daemon settings: {e}") from e
    check_settings(settings)
    return settings


def _read_toml(path: str) -> dict[str, Any]:
    try:
        text = Path(path).read_bytes()
    except OSError as e:
        raise SettingsError(f"{path}: cannot read the daemon configuration: {e.strerror}") from e
    try:
        data = msgspec.toml.decode(text)
    except msgspec.DecodeError as e:
        raise SettingsError(f"{path}: invalid TOML: {e}") from e
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: expected a table of settings")
    section = data.get("fumarole", data)
    unknown = sorted(set(section) - set(FIELDS))
    if unknown:
        raise SettingsError(f"{path}: unknown key {unknown[0]!r} (known: {', '.join(FIELDS)})")
    try:
        msgspec.convert(section, Settings)
    except msgspec.ValidationError as e:
        raise SettingsError(f"{path}: {e}") from e
    return dict(section)


def _from_env(var: str, key: str, raw: str) -> Any:
    default = getattr(Settings(), key)
    if isinstance(default, bool):
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off", ""):
            return False
        raise SettingsError(f"{var}={raw!r}: expected a boolean (true/false)")
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise SettingsError(f"{var}={raw!r}: expected an integer") from None
    if isinstance(default, tuple):
        return tuple(x.strip() for x in raw.split(",") if x.strip())
    if isinstance(default, float):
        try:
            return float(raw)
        except ValueError:
            raise SettingsError(f"{var}={raw!r}: expected a number") from None
    return raw


def split_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise SettingsError(f"listen: {listen!r} is not HOST:PORT")
    host = host.strip("[]")
    if not 0 <= int(port) <= 65535:
        raise SettingsError(f"listen: port {port} out of range")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_jaeger_url(url: str, where: str = "jaeger_url") -> str:
    """The Jaeger UI's base URL, checked: http(s)://host[:port][/path], no query."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise SettingsError(f"{where}: {url!r} is not an http(s) base URL like http://localhost:16686")
    return url.strip().rstrip("/")


def read_token(s: Settings, where: str = "read_token_file") -> str:
    """The read token the settings configure ("" = none): `read_token`, or the first line of
    `read_token_file`; SettingsError for both, an unreadable file or a token too short."""
    from fumarole.api.access import AccessError, read_token_from

    try:
        return read_token_from(s.read_token, s.read_token_file, where=where)
    except AccessError as e:
        raise SettingsError(str(e)) from None


def check_live(idle_timeout: float, per_client: int, prefix: str = "") -> None:
    """The live feed's bounds: `live_idle_timeout` (0 or at least 1 s), `live_per_client` (at least 1)."""
    if idle_timeout != 0 and not 1 <= idle_timeout <= 86_400:
        raise SettingsError(
            f"{prefix}live_idle_timeout: must be 0 (no limit) or 1 to 86400 seconds, got {idle_timeout}"
        )
    if per_client < 1:
        raise SettingsError(f"{prefix}live_per_client: must be at least 1, got {per_client}")


def check_allowed_hosts(hosts: tuple[str, ...], where: str = "allowed_hosts") -> tuple[str, ...]:
    from fumarole.api.access import AccessError, check_allowed_host

    try:
        return tuple(check_allowed_host(h, where) for h in hosts)
    except AccessError as e:
        raise SettingsError(str(e)) from None


def check_settings(s: Settings) -> None:
    check_jaeger_url(s.jaeger_url)
    check_allowed_hosts(s.allowed_hosts)
    check_live(s.live_idle_timeout, s.live_per_client)
    if s.require_read_token and not read_token(s):
        raise SettingsError(
            "require_read_token: no read token is configured (set read_token_file, flag --read-token FILE, "
            "or FUMAROLE_READ_TOKEN)"
        )
    read_token(s)
    if s.db:
        from fumarole.store.pg_url import DsnError, check_dsn

        try:
            check_dsn(s.db)
        except DsnError as e:
            raise SettingsError(
                f"{e}"
                + (
                    ""
                    if s.db.startswith(("postgresql://", "postgres://"))
                    else " (the SQLite log lives in data_dir; leave db empty)"
                )
            ) from None
    if not s.db and Path(s.data_dir).exists() and not Path(s.data_dir).is_dir():
        raise SettingsError(
            f"data_dir: {s.data_dir} is a file, not a directory (the log goes in DIR/fumarole.db)"
        )
    if s.schedule_period <= 0:
        raise SettingsError(f"schedule_period: must be positive, got {s.schedule_period}")
    if s.snapshot_every < 1:
        raise SettingsError(f"snapshot_every: must be at least 1, got {s.snapshot_every}")
    if s.max_body_bytes < 1024:
        raise SettingsError(f"max_body_bytes: must be at least 1024, got {s.max_body_bytes}")
    if s.lease_duration < 1:
        raise SettingsError(f"lease_duration: must be at least 1 second, got {s.lease_duration}")
    if s.kube_concurrency < 1:
        raise SettingsError(f"kube_concurrency: must be at least 1, got {s.kube_concurrency}")
    if s.kube_concurrency_max < s.kube_concurrency:
        raise SettingsError(
            f"kube_concurrency_max: must be at least kube_concurrency ({s.kube_concurrency}), "
            f"got {s.kube_concurrency_max}"
        )
    if s.adapter == "kubernetes" and not s.scheduler_names:
        raise SettingsError("scheduler_names: name at least one scheduler (e.g. volcano)")
    host, _ = split_listen(s.listen)
    if not is_loopback(host) and not s.allow_remote:
        raise SettingsError(
            f"listen: {s.listen} is beyond loopback; set allow_remote = true "
            "(flag --allow-remote, or FUMAROLE_ALLOW_REMOTE=true) to ask for it explicitly"
        )
