"""Saved scans of a node: ``bpfmem snapshot`` files and ``bpftool -j map show`` output, their
documents and what changed between two."""

from __future__ import annotations

from ..analysis.live import SnapshotDiff, SnapshotView, filter_maps
from ..analysis.live import diff_snapshots as diff
from ..analysis.live import snapshot_view as view_of
from ..values import replace


def snapshot_view(snap, profile) -> SnapshotView:
    """A scan's maps with the model's check of each on ``profile`` (None: no model): a
    :class:`~bpfmem.analysis.live.SnapshotView`, drawn by report.formats.render (its document
    is ``bpfmem/snapshot/v2``: report.documents.snapshot_document says which keys a map
    leaves out)."""
    return view_of(snap, profile)


def load_snapshot(path: str, *, profile=None):
    """A saved ``bpfmem snapshot`` (schema v2 or v1) or ``bpftool -j map show`` output, as a
    Snapshot; a bpftool list has no kernel of its own: ``profile`` names it (release,
    CPUs)."""
    from ..inputs import load_json
    from ..parse.snapshot import snapshot_from_bpftool, snapshot_from_dict
    data = load_json(path, "snapshot")
    try:
        if isinstance(data, list):
            return snapshot_from_bpftool(
                data, kernel=profile.version if profile is not None else "",
                cpus=profile.possible_cpus if profile is not None else 0)
        return snapshot_from_dict(data)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def diff_snapshots(old: str, new: str) -> SnapshotDiff:
    """What changed on a node between two saved snapshots: a
    :class:`~bpfmem.analysis.live.SnapshotDiff` (document ``bpfmem/snapshot-diff/v1``)."""
    return diff(load_snapshot(old), load_snapshot(new))


def filter_snapshot(snap, filters: dict):
    """``snap`` with only the maps matching every filter (owner, cgroup, name, type), and
    the programs matching those of them that apply to programs (owner, cgroup, pid)."""
    snap = replace(snap, maps=tuple(filter_maps(snap.maps, **filters)))
    if snap.progs is not None:
        from ..analysis.progs import filter_programs
        snap = replace(snap, progs=filter_programs(snap.progs, **filters))
    return snap
