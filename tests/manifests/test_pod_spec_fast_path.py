"""The pod spec's fast path (`plain_pod_spec`) reads exactly what the checked path reads.

For any spec, the fast path either declines (None) or gives the checked path's PodSpec; every
spec the checked path refuses is declined, so that the error still names the field.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fumarole.daemon.manifests import ManifestError, build_snapshot
from fumarole.daemon.manifests.fields import Doc
from fumarole.daemon.manifests.pods import checked_pod_spec, plain_pod_spec

DOC = Doc("t.yaml", 0, "Pod ns/p")


def checked(spec: dict[Any, Any]) -> Any:
    try:
        return checked_pod_spec(DOC, spec, "spec", "volcano")
    except ManifestError as e:
        return e


QUANTITY = st.sampled_from(["1", "500m", "2Gi", "1x", "-1", 3, 2.5, -4, True, None, [], {"a": 1}, "0"])
QUANTITIES = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods"]), QUANTITY, max_size=3),
    st.sampled_from([[], "cpu", {1: "1"}]),
)
RESOURCES = st.one_of(
    st.none(),
    st.fixed_dictionaries({}, optional={"requests": QUANTITIES, "limits": QUANTITIES}),
    st.sampled_from([[], "x", {2: {}}]),
)
STRING = st.sampled_from([None, "", "a", "volcano", 7, True, 1.5, [], {}])
CONTAINER = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "name": STRING,
            "image": STRING,
            "resources": RESOURCES,
            "ports": st.sampled_from([None, [], [{"containerPort": 80}], [{"hostPort": 8080}]]),
            "restartPolicy": STRING,
        },
    ),
    st.sampled_from([None, "c", [], {3: "x"}]),
)
SPEC = st.fixed_dictionaries(
    {},
    optional={
        "containers": st.one_of(st.lists(CONTAINER, max_size=3), st.sampled_from([None, "c", {}])),
        "initContainers": st.sampled_from([None, [], [{"resources": {"requests": {"cpu": "1"}}}]]),
        "schedulerName": STRING,
        "nodeName": STRING,
        "priorityClassName": STRING,
        "preemptionPolicy": STRING,
        "priority": st.sampled_from([None, 5, "x"]),
        "nodeSelector": st.sampled_from([None, {}, {"a": "b"}, {"a": 1}]),
        "affinity": st.sampled_from([None, {}, "x"]),
        "tolerations": st.sampled_from([None, [], [{"key": "k"}]]),
        "resources": st.sampled_from([None, {}, {"requests": {"cpu": "1"}}]),
        "restartPolicy": STRING,
    },
)


@settings(max_examples=600, deadline=None)
@given(SPEC)
def test_fast_path_declines_or_agrees_with_the_checked_path(spec: dict[str, Any]) -> None:
    fast = plain_pod_spec(spec, "volcano")
    slow = checked(spec)
    if isinstance(slow, ManifestError):
        assert fast is None
    elif fast is not None:
        assert fast == slow


def test_the_common_shape_takes_the_fast_path() -> None:
    spec = {
        "schedulerName": "volcano",
        "restartPolicy": "Never",
        "containers": [
            {"name": "a", "image": "busybox", "resources": {"requests": {"memory": "1Gi", "cpu": "500m"}}},
            {"name": "b", "resources": {"limits": {"cpu": 2}}},
            {"name": "c"},
        ],
    }
    fast = plain_pod_spec(spec, "default-scheduler")
    assert fast is not None
    assert fast == checked(spec)
    assert list(fast.requests.containers[0][0]) == ["cpu", "memory"]  # sorted as the checked path
    assert fast.images == ("busybox",)


def pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"containers": [{}, {"resources": {"limits": {"memory": "2Gx"}}}]},
            'spec.containers[1].resources.limits.memory: bad quantity "2Gx"',
        ),
        (
            {"containers": [{"resources": {"requests": {"cpu": "-1"}}}]},
            'spec.containers[0].resources.requests.cpu: bad quantity "-1": must not be negative',
        ),
        ({"containers": [{"image": ["x"]}]}, "spec.containers[0].image: expected a string, got a list"),
        ({"containers": [{"resources": {"requests": []}}]}, "requests: expected a mapping, got a list"),
        ({"containers": "c"}, "spec.containers: expected a list, got a string"),
        ({"nodeName": ["n"], "containers": []}, "spec.nodeName: expected a string, got a list"),
    ],
)
def test_errors_still_name_the_field(spec: dict[str, Any], expected: str) -> None:
    with pytest.raises(ManifestError) as e:
        build_snapshot([("t.yaml", 0, pod(spec))])
    assert "t.yaml" in str(e.value) and "(Pod ns/p)" in str(e.value)
    assert expected in str(e.value)
