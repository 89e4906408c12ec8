"""The enqueue action (actions/enqueue/enqueue.go): admit Pending PodGroups to Inqueue.

Queues are visited in QueueOrderFn order, one pending job per visit (JobOrderFn order); a job
without spec.minResources is admitted without asking plugins, otherwise JobEnqueueable votes.
A rejected job does not block the rest of its queue.  Each job is considered once per session.
"""

from __future__ import annotations

from fumarole.daemon.scheduler.framework.priority_queue import PriorityQueue
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.job import PHASE_INQUEUE, JobInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo

NAME = "enqueue"


class Enqueue:
    name = NAME

    def execute(self, ssn: Session) -> None:
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order_fn)
        seen: set[str] = set()
        jobs_map: dict[str, PriorityQueue[JobInfo]] = {}
        # Volcano visits every job: it pushes each job's queue (in the order of the queues' first
        # jobs) and stamps the job's schedule start; only pending jobs are queued for admission.
        # Jobs without pending work (Session.jobs_with_work) are not visited: their queues are
        # pushed from `Session.job_queues`, and the schedule start is never read back.
        # (The session keeps only jobs whose queue exists.)
        for name in ssn.job_queues:
            queue = ssn.queues[name]
            if queue.uid not in seen:
                seen.add(queue.uid)
                queues.push(queue)
        for job in ssn.jobs_with_work:  # in uid order
            if job.schedule_start is None:
                job.schedule_start = ssn.stamp_now()
            if job.is_pending():
                jobs_map.setdefault(job.queue, PriorityQueue(ssn.job_order_fn)).push(job)

        while not queues.empty():
            queue = queues.pop()
            jobs = jobs_map.get(queue.uid)
            if jobs is None or jobs.empty():
                continue
            job = jobs.pop()
            if job.min_resources is None or ssn.job_enqueueable(job):
                ssn.job_enqueued(job)
                job.status.phase = PHASE_INQUEUE
                ssn.enqueue_rejections.pop(job.uid, None)
            queues.push(queue)


def new() -> Enqueue:
    return Enqueue()
