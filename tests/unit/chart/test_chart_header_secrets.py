"""The Secrets a default policy's spec.prometheus.headers name are readable by name, as its auth's are."""

from __future__ import annotations

from pathlib import Path

from rendering import needs_helm, render

TENANT = {"name": "X-Scope-OrgID", "valueFrom": {"namespace": "mimir", "name": "tenant", "key": "org"}}


@needs_helm
def test_the_default_policys_header_secrets_are_readable_by_name(tmp_path: Path) -> None:
    values = {
        "defaultPolicy": {
            "enabled": True,
            "spec": {"prometheus": {"url": "http://mimir:8080/prometheus", "headers": [TENANT]}},
        },
    }

    objects = render(tmp_path, values)

    [(key, role)] = [
        (key, role) for key, role in objects.items() if key[0] == "Role" and key[1].endswith("-secrets")
    ]
    assert key[1].startswith("mimir/")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["tenant"]}
    ]
