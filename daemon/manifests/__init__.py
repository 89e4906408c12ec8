"""Kubernetes/Volcano YAML manifests -> the scheduler's model objects (a ClusterSnapshot).

`load_objects` reads files or directories; `build_snapshot` turns the objects into what
Volcano's scheduler cache would hold (pkg/scheduler/cache) after its controllers ran:

* Pod -> TaskInfo as api.NewTaskInfo: request = sum of containers, max with every init
  container (restartable "sidecar" init containers add to the running sum), pod-level
  requests, + overhead, + `pods: 1`; status from phase/nodeName/deletionTimestamp (an
  absent phase is Pending, what the API server stores on create); priority = spec.priority,
  else the value of the pod's PriorityClass (the Priority admission plugin), else 1, then
  the `volcano.sh/task-priority` annotation if it parses as int32; role and preemptable
  from annotation, then label.  Container requests default to limits per resource, as the
  API server's defaulting does.  Pods of other schedulers are kept (in `other_tasks`) only
  when bound to a node; they join no job.  Bound, not finished tasks occupy their node.
* A pod of ours without `scheduling.k8s.io/group-name` gets the PodGroup Volcano's
  PodGroup controller creates: `podgroup-<controller owner uid, else pod uid>`, minMember 1,
  queue from the pod's `scheduling.volcano.sh/queue-name` annotation, priorityClassName and
  preemptable annotation/label of the pod, minResources = the pod's quota usage, phase
  Pending (owners' `group-min-member` annotations are not read: owners are not loaded).
  An explicit PodGroup of that name wins.
* Pods naming a PodGroup that is not loaded stay in a JobInfo with has_pod_group=False.
* PodGroup -> JobInfo("<ns>/<name>"): minMember absent = 0 (the CRD has no default),
  empty queue -> default queue, priority = PriorityClass value, else the globalDefault
  class's value, else 0.  Queue: weight default 1, state default Open.  `root` (weight 1,
  reclaimable false) and the default queue (weight 1, reclaimable true) are created when
  missing, as cache.newDefaultAndRootQueue does.  The built-in PriorityClasses
  system-cluster-critical and system-node-critical exist unless given.
* batch.volcano.sh Job -> what the mutating webhook and the job controller create:
  task names default `default<i>`, task minAvailable default replicas (or
  minPartitions*partitionSize), job minAvailable default = sum of task minAvailable,
  queue default = the default queue, schedulerName default = first scheduler name; the
  PodGroup `<job>-<metadata.uid>` (the plain job name, the controller's legacy name, when the
  manifest has no uid) with the job's labels/annotations, minTaskMember, priorityClassName
  and minResources from calcPGMinResources (template requests, not defaulted: the CRD's pod
  template is not defaulted); pods `<job>-<task>-<index>` (uid `<ns>-<pod>`), Pending and
  unbound, with the controller's labels and annotations.  Simplified: the controller only
  creates pods once the PodGroup leaves Pending (here they exist at once, which gang and
  allocate treat alike); Job status, policies, plugins, volumes, dependsOn and job
  forwarding are ignored; tasks with equal priority keep their order (Go's unstable sort
  does the same for up to 12 tasks).
Not modelled: in-place resize status, node oversubscription, owners' annotations,
topologySpreadConstraints (PodFacts has no field for them).

Modules, one per stage: reading.py (files, directories, multi-document YAML, JSON, Lists),
objects.py (each object's kind and identity, duplicates refused), fields.py (checked field
access; errors name the field), kinds.py (supported kinds, well-known keys), one decoder per
kind group (nodes.py, queues.py, priority_classes.py, namespaces.py for Namespace/ResourceQuota/
PodDisruptionBudget, podgroups.py, pods.py with pod_requests.py), volcano_job.py (Job expansion),
snapshot.py (assembling the ClusterSnapshot), decoder.py (one object at a time, for daemon/cache),
errors.py (ManifestError).
"""

from fumarole.daemon.manifests.decoder import ObjectDecoder
from fumarole.daemon.manifests.errors import ManifestError
from fumarole.daemon.manifests.kinds import SUPPORTED_KINDS
from fumarole.daemon.manifests.priority_classes import BUILTIN_PRIORITY_CLASSES
from fumarole.daemon.manifests.reading import load_objects
from fumarole.daemon.manifests.snapshot import build_snapshot, load_snapshot
from fumarole.daemon.manifests.volcano_job import expand_job

__all__ = [
    "BUILTIN_PRIORITY_CLASSES",
    "SUPPORTED_KINDS",
    "ManifestError",
    "ObjectDecoder",
    "build_snapshot",
    "expand_job",
    "load_objects",
    "load_snapshot",
]
