"""Kubernetes' scheduler filter plugins and API rules, as the predicates and nodeorder plugins use them.

One module per Kubernetes filter plugin (node_affinity, taint_toleration, node_ports,
inter_pod_affinity, pod_topology_spread), the helpers they share (labels, pod_affinity_terms,
spread_constraints, node_label_table) and node_mirror (the session's Kubernetes NodeInfo
snapshot).  Written from the behaviour of Kubernetes v1.36 (the version Volcano vendors).
"""
