"""The fake API server's writes: create (with the API server's defaults and admission), update with
optimistic concurrency, merge / strategic merge patch, delete (graceful for bound pods), the
`pods/binding` and `pods/eviction` subresources.  Mixed into FakeApiServer (fake_apiserver.py).
"""

from __future__ import annotations

import copy
import datetime as dt
import uuid
from typing import TYPE_CHECKING, Any

from aiohttp import web
from fake_api_model import (
    ApiError,
    Resource,
    Store,
    conflict,
    merge_patch,
    not_found,
    now_rfc3339,
    same_object,
    status,
    status_meta,
    strategic_merge_patch,
    uid_mismatch,
)


class FakeWrites:
    store: Store
    _by_path: dict[tuple[str, str], Resource]

    if TYPE_CHECKING:

        def _key(self, res: Resource, ns: str | None, name: str) -> tuple[str, str]: ...

        def _out(self, res: Resource, obj: dict[str, Any], *, in_list: bool = False) -> dict[str, Any]: ...

    def _manager(self, request: web.Request | None) -> str:
        ua = request.headers.get("User-Agent", "") if request is not None else ""
        return ua.split("/")[0] or "unknown"

    def _stamp(
        self, res: Resource, obj: dict[str, Any], request: web.Request | None, op: str, sub: str = ""
    ) -> None:
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.store.next_rv())
        if request is None:  # the server's own writes (binding, graceful deletion) track no manager
            return
        entry = {
            "manager": self._manager(request),
            "operation": op,
            "apiVersion": res.api_version,
            "time": now_rfc3339(),
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {}, "f:spec": {}} if not sub else {"f:status": {}},
        }
        if sub:
            entry["subresource"] = sub
        # One entry per (manager, operation, subresource), updated in place.
        fields = list(meta.get("managedFields", []))
        ident = (entry["manager"], op, sub)
        for i, f in enumerate(fields):
            if (f.get("manager"), f.get("operation"), f.get("subresource", "")) == ident:
                fields[i] = entry
                break
        else:
            fields.append(entry)
        meta["managedFields"] = fields

    def _check_body(self, res: Resource, body: Any, ns: str | None, name: str | None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be an object")
        if body.get("kind") not in (None, res.kind) or body.get("apiVersion") not in (None, res.api_version):
            raise ApiError(
                400,
                "BadRequest",
                f"the API version in the data ({body.get('apiVersion')}) does not match the expected "
                f"API version ({res.api_version})",
            )
        meta = body.get("metadata")
        if not isinstance(meta, dict):
            raise ApiError(
                422, "Invalid", f'{res.kind} "" is invalid: metadata.name: Required value: name is required'
            )
        if name is not None and meta.get("name") not in (None, name):
            raise ApiError(
                400,
                "BadRequest",
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})",
            )
        if res.namespaced and ns is not None and meta.get("namespace") not in (None, ns):
            raise ApiError(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            )
        return body

    def _create(
        self, res: Resource, ns: str | None, body: Any, request: web.Request | None
    ) -> dict[str, Any]:
        obj = copy.deepcopy(self._check_body(res, body, ns, None))
        meta = obj["metadata"]
        name = meta.get("name") or ""
        if not name and meta.get("generateName"):
            name = meta["generateName"] + uuid.uuid4().hex[:5]
            meta["name"] = name
        if not name:
            raise ApiError(
                422, "Invalid", f'{res.kind} "" is invalid: metadata.name: Required value: name is required'
            )
        if res.namespaced:
            ns = ns or meta.get("namespace") or "default"
            meta["namespace"] = ns
            ns_res = self._by_path[("v1", "namespaces")]
            nsobj = self.store.objects[ns_res].get(("", ns))
            if nsobj is None:
                raise ApiError(
                    404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"}
                )
            if res.plural != "events" and nsobj.get("status", {}).get("phase") == "Terminating":
                raise ApiError(
                    403,
                    "Forbidden",
                    f"unable to create new content in namespace {ns} because it is being terminated",
                )
        key = self._key(res, ns, name)
        if key in self.store.objects[res]:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{res.gr} "{name}" already exists',
                {"name": name} | ({"group": res.group} if res.group else {}) | {"kind": res.plural},
            )
        for k in ("resourceVersion", "deletionTimestamp", "managedFields"):
            meta.pop(k, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if res.custom or res.kind in ("PodDisruptionBudget", "Pod"):
            meta["generation"] = 1
        obj["kind"], obj["apiVersion"] = res.kind, res.api_version
        self._defaults(res, obj)
        if res.kind == "Pod" and "status" in body and obj["status"].get("phase") != "Pending":
            obj["status"] = {"phase": "Pending", "qosClass": obj["status"].get("qosClass", "BestEffort")}
        self._stamp(res, obj, request, "Update")
        self.store.objects[res][key] = obj
        self.store.emit(res, ns or "", "ADDED", obj)
        return self._out(res, obj)

    def _defaults(self, res: Resource, obj: dict[str, Any]) -> None:
        if res.kind == "Pod":
            spec = obj.setdefault("spec", {})
            if not spec.get("containers"):
                raise ApiError(
                    422,
                    "Invalid",
                    f'Pod "{obj["metadata"]["name"]}" is invalid: spec.containers: Required value',
                )
            spec.setdefault("schedulerName", "default-scheduler")
            spec.setdefault("securityContext", {})
            for c in spec["containers"]:
                c.setdefault("imagePullPolicy", "Always")
                c.setdefault("terminationMessagePath", "/dev/termination-log")
                c.setdefault("terminationMessagePolicy", "File")
            # DefaultTolerationSeconds admission
            tolerations = spec.setdefault("tolerations", [])
            for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
                if not any(t.get("key") == key for t in tolerations):
                    tolerations.append(
                        {"effect": "NoExecute", "key": key, "operator": "Exists", "tolerationSeconds": 300}
                    )
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("terminationGracePeriodSeconds", 30)
            spec.setdefault("dnsPolicy", "ClusterFirst")
            spec.setdefault("enableServiceLinks", True)
            spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
            pcs = self.store.objects[self._by_path[("scheduling.k8s.io/v1", "priorityclasses")]]
            pcn = spec.get("priorityClassName")
            if pcn:
                pc = pcs.get(("", pcn))
                if pc is None and pcn not in ("system-cluster-critical", "system-node-critical"):
                    raise ApiError(
                        403,
                        "Forbidden",
                        f'pods "{obj["metadata"]["name"]}" is forbidden: '
                        f"no PriorityClass with name {pcn} was found",
                    )
                spec["priority"] = pc["value"] if pc else 2000000000
            else:
                default = [p for p in pcs.values() if p.get("globalDefault")]
                spec["priority"] = default[0]["value"] if default else 0
            requests = [c.get("resources", {}).get("requests") for c in spec["containers"]]
            obj["status"] = {"phase": "Pending", "qosClass": "Burstable" if any(requests) else "BestEffort"}
        elif res.kind == "Namespace":
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        elif res.kind == "Node":
            spec = obj.setdefault("spec", {})
            obj.setdefault("status", {})
            # TaintNodesByCondition admission: a new node is not ready until its controller says so.
            taints = [t for t in spec.get("taints") or [] if t.get("key") != "node.kubernetes.io/not-ready"]
            spec["taints"] = [*taints, {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
        elif res.kind == "PriorityClass":
            if "value" not in obj:
                raise ApiError(
                    422,
                    "Invalid",
                    f'PriorityClass "{obj["metadata"]["name"]}" is invalid: value: Required value',
                )
            obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
        elif res.kind == "Event":
            obj.setdefault("reportingComponent", "")
            obj.setdefault("reportingInstance", "")

    def _current(self, res: Resource, ns: str, name: str) -> dict[str, Any]:
        obj = self.store.objects[res].get(self._key(res, ns, name))
        if obj is None:
            raise not_found(res, name)
        return obj

    def _store_update(
        self,
        res: Resource,
        ns: str,
        name: str,
        new: dict[str, Any],
        request: web.Request | None,
        sub: str,
        op: str,
    ) -> dict[str, Any]:
        old = self._current(res, ns, name)
        if res.kind == "Pod" and old["spec"].get("nodeName") != new.get("spec", {}).get("nodeName"):
            raise ApiError(
                422,
                "Invalid",
                f'Pod "{name}" is invalid: spec: Forbidden: pod updates may not change fields other than ...',
            )
        # The main resource of a kind with a status subresource ignores status; /status ignores the rest.
        if "status" in res.subresources:
            if sub == "status":
                new = {
                    **copy.deepcopy(old),
                    "status": new.get("status", {}),
                    "metadata": status_meta(old, new),
                }
            else:
                new = {**new, "status": copy.deepcopy(old.get("status", {}))}
        for k in (
            "uid",
            "creationTimestamp",
            "namespace",
            "name",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ):
            if k in old["metadata"]:
                new["metadata"][k] = old["metadata"][k]
        new["kind"], new["apiVersion"] = res.kind, res.api_version
        # Custom resources count every change outside metadata (status too, without a status
        # subresource); built-in pods only spec changes.
        if res.custom and sub != "status":
            outside = {k: v for k, v in new.items() if k != "metadata"}
            if outside != {k: v for k, v in old.items() if k != "metadata"}:
                new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        elif res.kind == "Pod" and new.get("spec") != old.get("spec"):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        if same_object(old, new):
            return self._out(res, old)  # a no-op write does not bump the resourceVersion
        new["metadata"]["managedFields"] = copy.deepcopy(old["metadata"].get("managedFields", []))
        self._stamp(res, new, request, op, sub)
        self.store.objects[res][self._key(res, ns, name)] = new
        self.store.emit(res, ns, "MODIFIED", new)
        return self._out(res, new)

    def _update(
        self, res: Resource, ns: str, name: str, sub: str, body: Any, request: web.Request
    ) -> dict[str, Any]:
        new = copy.deepcopy(self._check_body(res, body, ns, name))
        old = self._current(res, ns, name)
        rv = new["metadata"].get("resourceVersion")
        if not rv and res.custom:
            raise ApiError(
                422,
                "Invalid",
                f'{res.kind}.{res.group} "{name}" is invalid: metadata.resourceVersion: Invalid value: 0: '
                "must be specified for an update",
            )
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(
                res,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        return self._store_update(res, ns, name, new, request, sub, "Update")

    def _patch(
        self, res: Resource, ns: str, name: str, sub: str, ctype: str, body: Any, request: web.Request
    ) -> dict[str, Any]:
        old = self._current(res, ns, name)
        if ctype == "application/merge-patch+json":
            new = merge_patch(old, body)
        elif ctype == "application/strategic-merge-patch+json" and not res.custom:
            new = strategic_merge_patch(old, body)
        else:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
                + ("" if res.custom else ", application/strategic-merge-patch+json"),
            )
        if not isinstance(new.get("metadata"), dict):
            raise ApiError(422, "Invalid", "metadata must be an object")
        rv = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(
                res,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        return self._store_update(res, ns, name, new, request, sub, "Update")

    def _remove(self, res: Resource, ns: str, name: str) -> dict[str, Any]:
        obj = self.store.objects[res].pop(self._key(res, ns, name))
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.store.next_rv())
        self.store.emit(res, ns, "DELETED", obj)
        return obj

    def _delete(self, res: Resource, ns: str, name: str, body: Any, q: Any) -> dict[str, Any]:
        obj = self._current(res, ns, name)
        pre = (body or {}).get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != obj["metadata"]["uid"]:
            raise conflict(
                res,
                name,
                uid_mismatch(pre["uid"], obj),
            )
        grace = body.get("gracePeriodSeconds") if isinstance(body, dict) else None
        if grace is None and q.get("gracePeriodSeconds") is not None:
            grace = int(q["gracePeriodSeconds"])
        if res.kind == "Pod":
            finished = obj.get("status", {}).get("phase") in ("Succeeded", "Failed")
            bound = bool(obj["spec"].get("nodeName"))
            if grace is None:
                grace = obj["spec"].get("terminationGracePeriodSeconds", 30)
            if bound and not finished and grace > 0:
                if obj["metadata"].get("deletionTimestamp"):
                    return self._out(res, obj)
                new = copy.deepcopy(obj)
                when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=grace)
                new["metadata"]["deletionTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
                new["metadata"]["deletionGracePeriodSeconds"] = grace
                self._stamp(res, new, None, "Update")
                self.store.objects[res][self._key(res, ns, name)] = new
                self.store.emit(res, ns, "MODIFIED", new)
                return self._out(res, new)
            if bound and not finished:  # grace 0: marked for deletion (MODIFIED), then removed
                new = copy.deepcopy(obj)
                meta = new["metadata"]
                meta.setdefault("deletionTimestamp", now_rfc3339())
                meta["deletionGracePeriodSeconds"] = 0
                meta["generation"] = meta.get("generation", 1) + 1
                self._stamp(res, new, None, "Update")
                self.store.objects[res][self._key(res, ns, name)] = new
                self.store.emit(res, ns, "MODIFIED", new)
        return self._out(res, self._remove(res, ns, name))

    def _bind(self, res: Resource, ns: str, name: str, body: Any) -> web.Response:
        if not isinstance(body, dict) or body.get("kind") not in (None, "Binding"):
            raise ApiError(400, "BadRequest", "expected a Binding")
        target = body.get("target") or {}
        if not target.get("name"):
            raise ApiError(422, "Invalid", 'Binding.core "" is invalid: target.name: Required value')
        if target.get("kind") not in (None, "", "Node"):
            raise ApiError(422, "Invalid", "must be empty or 'Node'")
        meta = body.get("metadata") or {}
        if meta.get("name") != name:
            raise ApiError(400, "BadRequest", "name in URL does not match name in Binding object")
        obj = self.store.objects[res].get((ns, name))
        if obj is None:
            raise not_found(res, name)
        uid = meta.get("uid")
        if uid and uid != obj["metadata"]["uid"]:
            raise conflict(res, name, uid_mismatch(uid, obj), "binding")
        if obj["metadata"].get("deletionTimestamp"):
            raise conflict(res, name, f"pod {name} is being deleted, cannot be assigned to a host", "binding")
        if obj["spec"].get("nodeName"):
            node = obj["spec"]["nodeName"]
            raise conflict(res, name, f'pod {name} is already assigned to node "{node}"', "binding")
        new = copy.deepcopy(obj)
        new["spec"]["nodeName"] = target["name"]
        if meta.get("annotations"):
            new["metadata"].setdefault("annotations", {}).update(meta["annotations"])
        set_condition(new, {"type": "PodScheduled", "status": "True"})
        self._stamp(res, new, None, "Update")
        self.store.objects[res][(ns, name)] = new
        self.store.emit(res, ns, "MODIFIED", new)
        return web.json_response(status(201, "", ""), status=201)

    def _evict(self, res: Resource, ns: str, name: str, body: Any) -> web.Response:
        obj = self._current(res, ns, name)
        finished = obj.get("status", {}).get("phase") in ("Succeeded", "Failed")
        if obj["spec"].get("nodeName") and not finished:
            if not obj["metadata"].get("deletionTimestamp"):
                new = copy.deepcopy(obj)
                grace = ((body or {}).get("deleteOptions") or {}).get("gracePeriodSeconds")
                grace = obj["spec"].get("terminationGracePeriodSeconds", 30) if grace is None else grace
                when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=grace)
                new["metadata"]["deletionTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
                new["metadata"]["deletionGracePeriodSeconds"] = grace
                set_condition(
                    new,
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "EvictionByEvictionAPI",
                        "message": "Eviction API: evicting",
                    },
                )
                self._stamp(res, new, None, "Update")
                self.store.objects[res][(ns, name)] = new
                self.store.emit(res, ns, "MODIFIED", new)
        else:
            self._remove(res, ns, name)
        return web.json_response(status(201, "", ""), status=201)


def set_condition(pod: dict[str, Any], condition: dict[str, Any]) -> None:
    """Replace (or add) the pod's condition of that type, stamped now, as the API server does."""
    kept = [c for c in pod["status"].get("conditions", []) if c.get("type") != condition["type"]]
    kept.append({**condition, "lastProbeTime": None, "lastTransitionTime": now_rfc3339()})
    pod["status"]["conditions"] = kept
