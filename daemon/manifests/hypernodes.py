"""HyperNode objects (topology.volcano.sh/v1alpha1) and PodGroup/Job `networkTopology` specs.

The checks are the CRDs' (spec.tier an integer ≥ 0, at least one member, each member of type
Node or HyperNode with exactly one of exactMatch, regexMatch, labelMatch; a HyperNode member by
exactMatch only — Volcano ignores the others); a regular expression that does not compile and a
label selector Kubernetes would refuse are errors too (Volcano logs them and matches nothing).
"""

from __future__ import annotations

import re

from fumarole.daemon.manifests.fields import Doc, Obj, show
from fumarole.daemon.manifests.objects import Entry
from fumarole.daemon.scheduler.model.hypernode import (
    MEMBER_HYPERNODE,
    MEMBER_NODE,
    MODE_HARD,
    MODE_SOFT,
    HyperNodeSpec,
    MemberSpec,
    NetworkTopology,
)
from fumarole.daemon.scheduler.plugins.k8s.labels import SelectorError, label_selector_from_meta

SELECTORS = ("exactMatch", "regexMatch", "labelMatch")


def decode_hypernode(e: Entry) -> HyperNodeSpec:
    """A HyperNode as a spec: tier, tierName and members."""
    d, o = e.doc, e.obj
    spec = d.mapping(o.get("spec"), "spec")
    if spec.get("tier") is None:
        d.fail("spec.tier", "required (an integer, 0 or more)")
    tier = d.integer(spec.get("tier"), "spec.tier", 0, 0)
    tier_name = d.string(spec.get("tierName"), "spec.tierName")
    members = d.seq(spec.get("members"), "spec.members")
    if not members:
        d.fail("spec.members", "at least one member is required")
    out = tuple(_member(d, m, f"spec.members[{i}]") for i, m in enumerate(members))
    return HyperNodeSpec(name=e.name, tier=tier, tier_name=tier_name, members=out)


def _member(d: Doc, raw: object, path: str) -> MemberSpec:
    m = d.mapping(raw, path)
    mtype = d.string(m.get("type"), path + ".type")
    if mtype not in (MEMBER_NODE, MEMBER_HYPERNODE):
        d.fail(path + ".type", f"expected Node or HyperNode, got {show(mtype) if mtype else 'nothing'}")
    sel = d.mapping(m.get("selector"), path + ".selector")
    given = [k for k in SELECTORS if sel.get(k) is not None]
    if len(given) != 1:
        d.fail(
            path + ".selector",
            "Either ExactMatch or RegexMatch or LabelMatch must be specified"
            if not given
            else "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified "
            f"(got {', '.join(given)})",
        )
    kind = given[0]
    sp = f"{path}.selector.{kind}"
    body = d.mapping(sel[kind], sp)
    if kind == "exactMatch":
        name = d.string(body.get("name"), sp + ".name")
        if not name:
            d.fail(sp + ".name", "required (a node or HyperNode name)")
        return MemberSpec(type=mtype, exact=name)
    if mtype == MEMBER_HYPERNODE:
        d.fail(sp, "a HyperNode member is selected by exactMatch only")
    if kind == "regexMatch":
        pattern = d.string(body.get("pattern"), sp + ".pattern")
        if not pattern:
            d.fail(sp + ".pattern", "required (a regular expression over node names)")
        try:
            rx = re.compile(pattern)
        except re.error as err:
            d.fail(sp + ".pattern", f"invalid regular expression {show(pattern)}: {err}")
        return MemberSpec(type=mtype, regex=rx)
    try:
        selector = label_selector_from_meta(body)
    except SelectorError as err:
        d.fail(sp, f"invalid label selector: {err}")
    empty = not body.get("matchLabels") and not body.get("matchExpressions")
    return MemberSpec(type=mtype, labels=selector, labels_empty=empty)


def decode_network_topology(d: Doc, raw: object, path: str) -> NetworkTopology | None:
    """`spec.networkTopology` of a PodGroup or Volcano Job (mode defaults to hard, as the CRD)."""
    if raw is None:
        return None
    nt: Obj = d.mapping(raw, path)
    mode = d.string(nt.get("mode"), path + ".mode", MODE_HARD) or MODE_HARD
    if mode not in (MODE_HARD, MODE_SOFT):
        d.fail(path + ".mode", f"expected hard or soft, got {show(mode)}")
    tier = nt.get("highestTierAllowed")
    allowed = None if tier is None else d.integer(tier, path + ".highestTierAllowed", 0, 0)
    name = d.string(nt.get("highestTierName"), path + ".highestTierName")
    return NetworkTopology(mode=mode, highest_tier_allowed=allowed, highest_tier_name=name)


def network_topology_manifest(nt: NetworkTopology) -> Obj:
    """The spec a PodGroup manifest carries for `nt` (the Job controller's copy)."""
    out: Obj = {"mode": nt.mode}
    if nt.highest_tier_allowed is not None:
        out["highestTierAllowed"] = nt.highest_tier_allowed
    elif nt.highest_tier_name:
        out["highestTierName"] = nt.highest_tier_name
    return out
