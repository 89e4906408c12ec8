"""The fake API server's `/metrics`: `apiserver_request_total` by verb, group, resource, subresource, code.

kube-apiserver counts every request in `apiserver_request_total` (labels `verb` — GET, LIST, WATCH,
POST, PUT, PATCH, DELETE —, `group`, `version`, `resource`, `subresource`, `scope`, `code`,
`component`, `dry_run`; k8s.io/apiserver pkg/endpoints/metrics/metrics.go).  `RequestCounter` keeps
the same counter for the fake, from the request's method and path alone, so that a benchmark reads
the same figure from either server; discovery and health requests are left out, as they carry no
resource.
"""

from __future__ import annotations

from collections import Counter

_VERBS = {"POST": "POST", "PUT": "PUT", "PATCH": "PATCH", "DELETE": "DELETE"}


def request_labels(method: str, path: str, watch: bool) -> tuple[str, str, str, str, str] | None:
    """(verb, group, version, resource, subresource) of a resource request; None for discovery."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if method == "GET":
        verb = "GET" if name else ("WATCH" if watch else "LIST")
    else:
        verb = _VERBS.get(method, method)
    return verb, group, version, resource, sub


class RequestCounter:
    """`apiserver_request_total` of the fake; `count` after each answer, `render` for `/metrics`."""

    def __init__(self) -> None:
        self.totals: Counter[tuple[str, str, str, str, str, int]] = Counter()

    def count(self, method: str, path: str, watch: bool, code: int) -> None:
        labels = request_labels(method, path, watch)
        if labels is not None:
            self.totals[(*labels, code)] += 1

    def render(self) -> str:
        lines = [
            "# HELP apiserver_request_total Counter of apiserver requests broken out for each verb, "
            "dry run value, group, version, resource, scope, component, and HTTP response code.",
            "# TYPE apiserver_request_total counter",
        ]
        for (verb, group, version, resource, sub, code), n in sorted(self.totals.items()):
            lines.append(
                f'apiserver_request_total{{code="{code}",component="apiserver",dry_run="",'
                f'group="{group}",resource="{resource}",subresource="{sub}",verb="{verb}",'
                f'version="{version}"}} {n}'
            )
        return "\n".join(lines) + "\n"
