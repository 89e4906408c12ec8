"""The REST API (aiohttp): cycles, decisions, jobs, queues, nodes, why-pending, metrics, OpenAPI."""
