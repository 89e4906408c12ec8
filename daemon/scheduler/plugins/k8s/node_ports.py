"""The NodePorts filter's rules: `HostPortInfo` sanitising and conflict checks."""

from __future__ import annotations

DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"
DEFAULT_PROTOCOL = "TCP"


PortKey = tuple[str, int]  # (protocol, port)
UsedPorts = dict[PortKey, set[str]]  # (protocol, port) -> host IPs (HostPortInfo, indexed by port)


def sanitize_port(ip: str, protocol: str, port: int) -> tuple[str, str, int]:
    return ip or DEFAULT_BIND_ALL_HOST_IP, protocol or DEFAULT_PROTOCOL, port


def port_conflict(used: UsedPorts, ip: str, protocol: str, port: int) -> bool:
    """HostPortInfo.CheckConflict: 0.0.0.0 conflicts with any IP; an IP with itself and 0.0.0.0."""
    if port <= 0:
        return False
    ip, protocol, port = sanitize_port(ip, protocol, port)
    ips = used.get((protocol, port))
    if not ips:
        return False
    if ip == DEFAULT_BIND_ALL_HOST_IP:
        return True
    return ip in ips or DEFAULT_BIND_ALL_HOST_IP in ips
