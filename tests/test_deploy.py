"""Structural checks of deploy/: the Kubernetes manifests, the Prometheus snippet and the Grafana
dashboard. Pure: no cluster, no network, no root."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import yaml  # noqa: E402  (PyYAML: in the test extra)

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
PORT = 9435

# The exporter's metric names, fixed for issue 6 (map, cgroup, node and self metrics) and issue 7
# (pod memory). tests/test_export.py cross-checks this list against a live scrape of
# `bpfmem export`, so a renamed metric fails there and the dashboard check here together.
EXPECTED_METRICS = frozenset({
    # per map: labels id, name, type, owner_comm, cgroup
    "bpfmem_map_memlock_bytes",
    "bpfmem_map_charged_bytes",
    "bpfmem_map_max_entries",
    "bpfmem_map_entries",
    "bpfmem_map_pressure_ratio",
    # per cgroup: label cgroup
    "bpfmem_cgroup_map_memlock_bytes",
    "bpfmem_cgroup_maps",
    "bpfmem_cgroup_memory_usage_bytes",
    "bpfmem_cgroup_memory_limit_bytes",
    "bpfmem_cgroup_map_share_ratio",
    # per node
    "bpfmem_node_map_memlock_bytes",
    "bpfmem_node_maps",
    # the exporter itself
    "bpfmem_scan_duration_seconds",
    "bpfmem_scans_total",
    "bpfmem_scan_errors_total",
    "bpfmem_maps_skipped_total",
    "bpfmem_build_info",
})

_METRIC_RE = re.compile(r"bpfmem_[a-z_]+")


def dashboard_metric_names(path: str | Path) -> set[str]:
    """Every ``bpfmem_*`` metric name used by the PromQL of a Grafana dashboard: the ``expr`` of
    every target (nested rows included) and the queries of the templating variables."""
    dashboard = json.loads(Path(path).read_text())
    exprs: list[str] = []
    for panel in _all_panels(dashboard):
        exprs += [t.get("expr", "") for t in panel.get("targets", [])]
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        exprs.append(query.get("query", "") if isinstance(query, dict) else str(query or ""))
        exprs.append(str(var.get("definition", "")))
    return {name for expr in exprs for name in _METRIC_RE.findall(expr)}


def _all_panels(dashboard: dict) -> list[dict]:
    out = []
    for panel in dashboard.get("panels", []):
        out.append(panel)
        out += panel.get("panels", [])  # panels inside a collapsed row
    return out


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d is not None]


def _one(kind: str, name: str = "daemonset.yaml") -> dict:
    found = [d for d in _docs(name) if d.get("kind") == kind]
    assert len(found) == 1, f"{name}: expected one {kind}, found {len(found)}"
    return found[0]


def _container() -> dict:
    containers = _one("DaemonSet")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def documented_capabilities() -> list[str]:
    """The list on the ``Capabilities:`` line of deploy/README.md."""
    lines = [ln for ln in (DEPLOY / "README.md").read_text().splitlines()
             if ln.startswith("Capabilities:")]
    assert len(lines) == 1, "deploy/README.md needs exactly one line starting with 'Capabilities:'"
    return [c.strip() for c in lines[0].split(":", 1)[1].split(",") if c.strip()]


# --- the YAML files -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["daemonset.yaml", "service.yaml", "servicemonitor.yaml",
                                  "prometheus-scrape.yaml"])
def test_yaml_parses(name):
    docs = _docs(name)
    assert docs and all(isinstance(d, dict) for d in docs)


@pytest.mark.parametrize("name", ["daemonset.yaml", "service.yaml", "servicemonitor.yaml"])
def test_kubernetes_objects_are_complete_and_in_the_namespace(name):
    for doc in _docs(name):
        assert doc.get("apiVersion") and doc.get("kind") and doc["metadata"].get("name"), doc
        if doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace") == "bpfmem", (name, doc["kind"])


def test_daemonset_file_has_namespace_serviceaccount_daemonset():
    kinds = [d["kind"] for d in _docs("daemonset.yaml")]
    assert kinds[0] == "Namespace", "the Namespace must come first so one apply creates everything"
    assert set(kinds) == {"Namespace", "ServiceAccount", "DaemonSet"}
    assert _one("Namespace")["metadata"]["name"] == "bpfmem"
    pod = _one("DaemonSet")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == _one("ServiceAccount")["metadata"]["name"]


# --- the DaemonSet's privileges -------------------------------------------------------------------

def test_daemonset_selector_matches_template():
    ds = _one("DaemonSet")
    selector = ds["spec"]["selector"]["matchLabels"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()


def test_host_pid():
    assert _one("DaemonSet")["spec"]["template"]["spec"]["hostPID"] is True


def test_not_privileged():
    pod = _one("DaemonSet")["spec"]["template"]["spec"]
    for c in pod["containers"] + pod.get("initContainers", []):
        assert c.get("securityContext", {}).get("privileged") in (None, False), c["name"]
    assert _container()["securityContext"]["privileged"] is False


def test_capabilities_drop_all_and_add_exactly_the_documented_list():
    caps = _container()["securityContext"]["capabilities"]
    assert caps["drop"] == ["ALL"]
    documented = documented_capabilities()
    assert documented, "no capability on the README's Capabilities: line"
    assert sorted(caps["add"]) == sorted(documented)
    assert len(set(caps["add"])) == len(caps["add"])
    # Kubernetes spells capabilities without the CAP_ prefix (the runtime adds it).
    assert not [c for c in caps["add"] if c.startswith("CAP_") or c != c.upper()]


def test_security_context():
    sc = _container()["securityContext"]
    assert sc["runAsUser"] == 0  # added capabilities reach uid 0 only (deploy/README.md)
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["seccompProfile"]["type"] == "RuntimeDefault"
    # no_new_privs is no barrier next to SYS_ADMIN, and the API rejects the pair (README).
    assert "allowPrivilegeEscalation" not in sc


def _volume(name: str) -> dict:
    pod = _one("DaemonSet")["spec"]["template"]["spec"]
    (vol,) = [v for v in pod["volumes"] if v["name"] == name]
    return vol


def _mount_of(host_path: str) -> dict:
    pod = _one("DaemonSet")["spec"]["template"]["spec"]
    names = [v["name"] for v in pod["volumes"] if v.get("hostPath", {}).get("path") == host_path]
    assert len(names) == 1, f"one hostPath volume for {host_path}"
    (mount,) = [m for m in _container()["volumeMounts"] if m["name"] == names[0]]
    return mount


def test_bpffs_mount_is_read_only_host_to_container():
    mount = _mount_of("/sys/fs/bpf")
    assert mount["readOnly"] is True
    assert mount["mountPropagation"] == "HostToContainer"
    assert mount["mountPath"] == "/sys/fs/bpf"


def test_cgroup_mount_is_read_only():
    mount = _mount_of("/sys/fs/cgroup")
    assert mount["readOnly"] is True


def test_every_host_path_is_mounted_read_only():
    pod = _one("DaemonSet")["spec"]["template"]["spec"]
    host = {v["name"] for v in pod["volumes"] if "hostPath" in v}
    for m in _container()["volumeMounts"]:
        if m["name"] in host:
            assert m.get("readOnly") is True, m


def test_tolerates_every_taint():
    tolerations = _one("DaemonSet")["spec"]["template"]["spec"]["tolerations"]
    assert {"operator": "Exists"} in tolerations


def test_memory_limit():
    resources = _container()["resources"]
    assert resources["limits"]["memory"] == "128Mi"
    assert "memory" in resources["requests"] and "cpu" in resources["requests"]


# --- command line, ports and scraping --------------------------------------------------------------

def _listen_arg(args: list[str]) -> str:
    for i, a in enumerate(args):
        if a == "--listen":
            return args[i + 1]
        if a.startswith("--listen="):
            return a.split("=", 1)[1]
    raise AssertionError(f"no --listen in {args}")


def test_container_runs_the_exporter_on_all_addresses():
    c = _container()
    argv = c.get("command", []) + c["args"]
    assert argv[:2] == ["bpfmem", "export"]
    assert _listen_arg(c["args"]) == f"0.0.0.0:{PORT}"
    assert "--entries" in c["args"]
    assert c["image"].startswith("ghcr.io/bpfmem/bpfmem:")


def test_port_name_matches_service_servicemonitor_and_probes():
    (port,) = _container()["ports"]
    assert port == {"name": "metrics", "containerPort": PORT, "protocol": "TCP"}
    svc = _one("Service", "service.yaml")
    (sport,) = svc["spec"]["ports"]
    assert sport["name"] == port["name"] and sport["port"] == PORT
    assert sport["targetPort"] in (port["name"], PORT)
    pod_labels = _one("DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert svc["spec"].get("clusterIP") == "None", "headless: one endpoint per node"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        # the cheap endpoint: /metrics may run a full scan of the node
        get = _container()[probe]["httpGet"]
        assert get["path"] == "/healthz" and get["port"] in (port["name"], PORT)


def test_linux_nodes_only_despite_tolerating_every_taint():
    spec = _one("DaemonSet")["spec"]["template"]["spec"]
    assert {"operator": "Exists"} in spec["tolerations"]
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}


def test_servicemonitor():
    sm = _one("ServiceMonitor", "servicemonitor.yaml")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    svc = _one("Service", "service.yaml")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"]["matchNames"] == ["bpfmem"]
    (ep,) = sm["spec"]["endpoints"]
    assert ep["port"] == svc["spec"]["ports"][0]["name"] == "metrics"
    assert ep["interval"] == "30s" and ep.get("path", "/metrics") == "/metrics"
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node",
            "action": "replace"} in ep["relabelings"]


def test_prometheus_scrape_snippet():
    (job,) = yaml.safe_load((DEPLOY / "prometheus-scrape.yaml").read_text())["scrape_configs"]
    assert [sd["role"] for sd in job["kubernetes_sd_configs"]] == ["pod"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    relabel = job["relabel_configs"]
    keep = [r for r in relabel if r.get("action") == "keep"
            and r["source_labels"] == ["__meta_kubernetes_pod_container_port_name"]]
    assert keep and keep[0]["regex"] == _container()["ports"][0]["name"]
    assert any(r["source_labels"] == ["__meta_kubernetes_pod_node_name"]
               and r["target_label"] == "node" for r in relabel)


# --- the Grafana dashboard ------------------------------------------------------------------------

DASHBOARD = DEPLOY / "grafana-dashboard.json"


def test_dashboard_loads_with_a_datasource_input_and_variables():
    d = json.loads(DASHBOARD.read_text())
    assert d["schemaVersion"] >= 36 and d["title"] and d["uid"]
    assert [i["name"] for i in d["__inputs"]] == ["DS_PROMETHEUS"]
    assert d["__inputs"][0]["pluginId"] == "prometheus"
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert {"node", "cgroup"} <= variables.keys()
    for v in variables.values():
        assert v["datasource"]["uid"] == "${DS_PROMETHEUS}"


def test_every_panel_has_a_datasource_and_targets():
    d = json.loads(DASHBOARD.read_text())
    panels = [p for p in _all_panels(d) if p.get("type") != "row"]
    assert len(panels) >= 6
    ids = [p["id"] for p in panels]
    assert len(set(ids)) == len(ids)
    for p in panels:
        assert p["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}, p["title"]
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(set(refs)) == len(refs), p["title"]
        for t in p["targets"]:
            assert t["expr"].strip(), p["title"]
            assert t.get("datasource", p["datasource"])["uid"] == "${DS_PROMETHEUS}"
            assert t["expr"].count("(") == t["expr"].count(")"), (p["title"], t["expr"])
        assert {"x", "y", "w", "h"} <= p["gridPos"].keys()


def test_dashboard_has_the_panels_the_issue_asks_for():
    d = json.loads(DASHBOARD.read_text())
    by_type: dict[str, list[str]] = {}
    for p in _all_panels(d):
        by_type.setdefault(p["type"], []).extend(t["expr"] for t in p.get("targets", []))
    series, tables = " ".join(by_type["timeseries"]), " ".join(by_type["table"])
    assert "bpfmem_node_map_memlock_bytes" in series
    assert "topk(20" in tables and "bpfmem_map_memlock_bytes" in tables
    assert "bpfmem_map_pressure_ratio" in tables and "> 0.8" in tables
    assert "bpfmem_cgroup_map_memlock_bytes" in series
    for m in ("bpfmem_cgroup_memory_usage_bytes", "bpfmem_cgroup_memory_limit_bytes",
              "bpfmem_cgroup_map_share_ratio", "bpfmem_scan_duration_seconds",
              "bpfmem_scan_errors_total"):
        assert m in series, m


def test_dashboard_uses_only_the_exporter_metric_names():
    used = dashboard_metric_names(DASHBOARD)
    assert used, "no bpfmem metric found in the dashboard"
    assert used <= EXPECTED_METRICS, sorted(used - EXPECTED_METRICS)


def test_dashboard_metric_names_helper(tmp_path):
    d = {"panels": [
        {"type": "timeseries", "targets": [{"expr": 'sum by (node) (bpfmem_node_maps{node=~"$node"})'}]},
        {"type": "row", "panels": [
            {"type": "table", "targets": [{"expr": "topk(5, bpfmem_map_memlock_bytes) and on (id) "
                                                    "bpfmem_map_entries"}]}]}],
        "templating": {"list": [{"name": "cgroup",
                                 "query": {"query": "label_values(bpfmem_cgroup_maps, cgroup)"},
                                 "definition": "label_values(bpfmem_cgroup_maps, cgroup)"}]}}
    path = tmp_path / "d.json"
    path.write_text(json.dumps(d))
    assert dashboard_metric_names(path) == {"bpfmem_node_maps", "bpfmem_map_memlock_bytes",
                                            "bpfmem_map_entries", "bpfmem_cgroup_maps"}


# --- docs ---------------------------------------------------------------------------------------

def test_readme_documents_every_metric_and_the_capabilities():
    text = (DEPLOY / "README.md").read_text()
    for m in EXPECTED_METRICS:
        assert f"`{m}`" in text, m
    for cap in documented_capabilities():
        assert f"CAP_{cap}" in text, cap


def test_dockerfile():
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    assert "[export]" in text
    assert re.search(r'^ENTRYPOINT \["bpfmem"\]', text, re.M)
