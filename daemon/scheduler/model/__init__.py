"""The scheduler's data model: resources, tasks, jobs, nodes, queues and the snapshot."""
