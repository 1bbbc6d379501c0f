from pathlib import Path

import pytest

from promsched.sandbox.node_metrics.profiles import (
    LoadProfile,
    ProfileError,
    load_profiles_file,
    parse_profiles,
)

NODES = ["node-0", "node-1", "node-2"]


def test_nodes_without_an_entry_get_the_files_default() -> None:
    setups = parse_profiles({"default": {"cpu": 50}, "nodes": {"node-1": {"cpu": 90, "diskUsed": 10}}}, NODES)
    assert setups["node-0"].load.cpu == 50
    assert setups["node-1"].load == LoadProfile(cpu=90, disk_used=10)
    assert setups["node-2"].load.memory == LoadProfile().memory


def test_labels_and_taints_are_read() -> None:
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    setups = parse_profiles({"nodes": {"node-0": {"labels": {"gpu": True}, "taints": [taint]}}}, NODES)
    assert setups["node-0"].labels == {"gpu": "True"}
    assert setups["node-0"].taints == [taint]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"nodes": {"node-0": {"cpu": 120}}}, "nodes.node-0.cpu: 120.0 is not a percentage"),
        ({"nodes": {"node-0": {"gpu": 1}}}, "nodes.node-0.gpu: unknown field"),
        ({"nodes": {"node-9": {"cpu": 1}}}, "node-9 not in the sandbox"),
        ({"default": {"network": -1}}, "default.network: -1.0 must not be negative"),
        ({"default": {"memory": "lots"}}, "default.memory: 'lots' is not a number"),
        ({"nodes": {"node-0": {"taints": [{"key": "a", "effect": "Sometimes"}]}}}, "taints[0]: needs a key"),
        ({"extra": 1}, "unknown key(s) extra"),
        ([1, 2], "expected a mapping"),
    ],
)
def test_bad_profiles_name_the_field(document: object, message: str) -> None:
    with pytest.raises(ProfileError) as caught:
        parse_profiles(document, NODES)
    assert message in str(caught.value)


def test_an_unreadable_file_is_a_profile_error(tmp_path: Path) -> None:
    broken = tmp_path / "profiles.yaml"
    broken.write_text("nodes: [unclosed")
    with pytest.raises(ProfileError, match=r"profiles\.yaml"):
        load_profiles_file(broken, NODES)
