"""The event log: Fumarole's source of truth and its vocabulary (imports nothing from daemon or api)."""
