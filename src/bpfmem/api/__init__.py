"""The public library surface: what the CLI, the exporter, tests and notebooks call.

>>> from bpfmem import api
>>> spec = api.load_object(api.example_object_path())
>>> [m.name for m in spec.maps][:2]   # doctest: +SKIP

Each function is a thin delegation in the module of its family (the table below), where it
and every import it needs are at the top. ``api.NAME`` loads that module the first time NAME
is used, so a command loads only its own family: ``bpfmem maps`` never imports the live-node
scanner, ``bpfmem snapshot`` never imports the object parser. The work itself is done a layer
down: ``parse/`` reads inputs, ``model/`` and ``analysis/`` compute, ``host/`` touches the
system, ``report/`` makes documents and draws them.
"""

from __future__ import annotations

from importlib import import_module

# family module -> the names it provides
FAMILIES: dict[str, tuple[str, ...]] = {
    "objects": ("EXAMPLE_OBJECT", "example_object_path", "load_object", "load_objects",
                "load_all", "load_embedded", "carries_objects", "loader_name"),
    "kernels": ("profile", "profiles", "resolve_kernels", "parse_release",
                "newest_modelled_release"),
    "maps": ("inventory", "one_or_matrix", "unmatched_sets"),
    "estimate": ("shape_from_args", "estimate_map", "estimate_batch_stream", "read_lines"),
    "measure": ("measure_object",),
    "paths": ("expand_paths", "is_snapshot_file"),
    "gate": ("make_whatif", "gate_settings", "check_gates", "check_objects", "diff_objects"),
    "advise": ("advise_objects", "load_occupancy", "occupancy_from"),
    "snapshots": ("load_snapshot", "snapshot_view", "diff_snapshots",
                  "filter_snapshot"),
    "node": ("scan_node", "scan_memo", "cgroup_memory_of", "cgroup_usage_of"),
    "session": ("sweep_leftovers", "signals_interrupt", "collector_paused"),
    "export": ("metrics_cache", "serve_metrics"),
    "pod": ("pod_cgroup", "go_prober", "pod_view", "pod_headroom", "pod_result",
            "pod_trace", "load_trace", "write_trace_plot", "parse_container_id",
            "go_endpoints"),
    "size": ("load_binary_size", "why_linked", "binary_size", "binary_size_diff",
             "check_binaries", "split_binaries"),
}

__all__ = [name for names in FAMILIES.values() for name in names]
_HOME = {name: family for family, names in FAMILIES.items() for name in names}


def __getattr__(name: str):
    family = _HOME.get(name)
    if family is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{family}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
