"""The kinds Fumarole reads (API group, kind -> apiVersion, namespaced) and the well-known keys.

The labels and annotations Volcano's controllers and scheduler read or write, and the rule that
reads a `volcano.sh/preemptable` flag from annotations, then labels.
"""

from __future__ import annotations

from collections.abc import Mapping

from fumarole.daemon.scheduler.framework.conf import GO_PARSE_BOOL

GROUP_NAME_KEY = "scheduling.k8s.io/group-name"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_INDEX_KEY = "volcano.sh/task-index"
JOB_NAME_KEY = "volcano.sh/job-name"
JOB_NAMESPACE_KEY = "volcano.sh/job-namespace"
JOB_QUEUE_KEY = "volcano.sh/queue-name"
PREEMPTABLE_KEY = "volcano.sh/preemptable"
TASK_PRIORITY_KEY = "volcano.sh/task-priority"
COOLDOWN_KEY = "volcano.sh/cooldown-time"
REVOCABLE_ZONE_KEY = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
DEFAULT_SCHEDULER = "default-scheduler"

# (API group, kind) -> (apiVersion shown in messages, namespaced).
SUPPORTED_KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("", "Node"): ("v1", False),
    ("", "Pod"): ("v1", True),
    ("", "Namespace"): ("v1", False),
    ("", "ResourceQuota"): ("v1", True),
    ("policy", "PodDisruptionBudget"): ("policy/v1", True),
    ("scheduling.k8s.io", "PriorityClass"): ("scheduling.k8s.io/v1", False),
    ("scheduling.volcano.sh", "Queue"): ("scheduling.volcano.sh/v1beta1", False),
    ("scheduling.volcano.sh", "PodGroup"): ("scheduling.volcano.sh/v1beta1", True),
    ("batch.volcano.sh", "Job"): ("batch.volcano.sh/v1alpha1", True),
    ("topology.volcano.sh", "HyperNode"): ("topology.volcano.sh/v1alpha1", False),
    ("nodeinfo.volcano.sh", "Numatopology"): ("nodeinfo.volcano.sh/v1alpha1", False),
}
KIND_GROUPS = {kind: group for group, kind in SUPPORTED_KINDS}
_GO_BOOLS = GO_PARSE_BOOL  # strconv.ParseBool


def go_bool(value: str) -> bool | None:
    """strconv.ParseBool: True/False, or None when the text is not a Go boolean."""
    return _GO_BOOLS.get(value)


def preemptable(annotations: Mapping[str, str], labels: Mapping[str, str], default: bool) -> bool:
    """GetPodPreemptable / extractPreemptable: annotation, then label; unparsable -> false."""
    for source in (annotations, labels):
        if PREEMPTABLE_KEY in source:
            return go_bool(source[PREEMPTABLE_KEY]) is True
    return default
