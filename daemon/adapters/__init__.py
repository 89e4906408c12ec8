"""Cluster adapters: where observed facts come from and where decisions go (simulator, Kubernetes)."""
