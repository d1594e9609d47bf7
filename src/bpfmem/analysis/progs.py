"""Programs beside maps: what the live programs of a node add up to, per process, per memory
cgroup and for the node (pure: over :class:`~bpfmem.records.LiveProg` records), and what an
object's programs imply before load.

A program is counted once, for its primary holder: the first process holding a program fd,
else the first holding a link to it (a program kept by a pin or by an attachment alone, e.g.
a tc filter, has no holder: cgroup None).
"""

from __future__ import annotations

from ..values import dataclass

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)

if TYPE_CHECKING:    # the live records name types here only (maps' start-up needs none)
    from ..records import LiveBtf, LiveProg, Owner

__all__ = ["filter_programs", "ProgSum", "ProgramTotals", "program_totals", "prog_holder",
           "BPF_PROG_HEADER",
           "bpf_prog_header", "memlock_lower_bound", "ProgramBound", "program_bounds",
           "MeasuredProg", "ProgramsMeasured", "programs_measured"]


def prog_holder(p: LiveProg) -> Owner | None:
    """The process a program is counted for (None: held by no process)."""
    if p.owners:
        return p.owners[0]
    if p.link_owners:
        return p.link_owners[0]
    return None


@dataclass(frozen=True)
class ProgSum:
    """Programs summed for one holder (a cgroup path, or a pid)."""
    key: str | int | None
    programs: int
    memlock: int
    jited: int          # bytes of JIT images
    xlated: int         # bytes of instructions after the verifier


@dataclass(frozen=True)
class ProgramTotals:
    node: ProgSum
    cgroups: tuple[ProgSum, ...]      # largest memlock first
    processes: tuple[ProgSum, ...]    # largest memlock first
    btf_objects: int                  # loaded by processes (not vmlinux or modules)
    btf_bytes: int
    kernel_btf_bytes: int             # vmlinux and modules' BTF


def filter_programs(progs, *, owner: str | None = None, cgroup: str | None = None,
                    pid: int | None = None, name: str | None = None, type: str | None = None):
    """Programs matching the live filters that apply to them: ``owner`` a comm glob,
    ``cgroup`` a substring of a holder's cgroup, ``pid`` (over program-fd and link holders).
    ``name`` and ``type`` filter maps: given, they leave the programs as they are."""
    import fnmatch
    out = []
    for p in progs:
        holders = p.owners + p.link_owners
        if owner and not any(fnmatch.fnmatchcase(o.comm, owner) for o in holders):
            continue
        if cgroup and not any(o.cgroup and cgroup in o.cgroup for o in holders):
            continue
        if pid is not None and not any(o.pid == pid for o in holders):
            continue
        out.append(p)
    return tuple(out)


def _sum(key, progs) -> ProgSum:
    memlock = jited = xlated = 0
    for p in progs:
        memlock += p.memlock or 0
        jited += p.jited_prog_len
        xlated += p.xlated_prog_len
    return ProgSum(key, len(progs), memlock, jited, xlated)


def _sums(groups: dict) -> tuple[ProgSum, ...]:
    """Each group's sum, largest memlock first (then by key; ties keep the groups' order)."""
    return tuple(sorted([_sum(k, v) for k, v in groups.items()],
                        key=lambda s: (-s.memlock, str(s.key))))


def program_totals(progs: tuple[LiveProg, ...], btfs: tuple[LiveBtf, ...] = ()
                   ) -> ProgramTotals:
    cgroups: dict = {}      # cgroup -> its programs, and pid -> its programs (a program
    pids: dict = {}         # held by no process: under cgroup None, and no pid)
    for p in progs:
        o = prog_holder(p)
        if o is None:
            cgroups.setdefault(None, []).append(p)
            continue
        cgroups.setdefault(o.cgroup, []).append(p)
        pids.setdefault(o.pid, []).append(p)
    own = [b for b in btfs if not b.kernel_btf]
    return ProgramTotals(
        node=_sum(None, progs), cgroups=_sums(cgroups), processes=_sums(pids),
        btf_objects=len(own), btf_bytes=sum(b.btf_size for b in own),
        kernel_btf_bytes=sum(b.btf_size for b in btfs if b.kernel_btf))


# ---- before load ----

# sizeof(struct bpf_prog) on x86_64 (its insns[] is a flexible array at the end, so this is
# the offsetof(struct bpf_prog, insns) that bpf_prog_size() adds to the instructions:
# include/linux/filter.h), read from Debian's BTF of each release (tests/data/btf) and this
# host's 6.18; a release between two uses the older one's
BPF_PROG_HEADER = (((5, 10), 56), ((6, 1), 72), ((6, 12), 72), ((6, 18), 96))
BPF_INSN_SIZE = 8


def bpf_prog_header(release: tuple[int, ...]) -> int:
    """sizeof(struct bpf_prog) of ``release`` (the smallest known before 5.10)."""
    size = BPF_PROG_HEADER[0][1]
    for rel, n in BPF_PROG_HEADER:
        if tuple(release[:2]) >= rel:
            size = n
    return size


def memlock_lower_bound(insns: int, page_size: int = 4096, header: int = 0) -> int:
    """The least memlock the kernel reports for a program of ``insns`` instructions as the
    loader hands them over: ``bpf_prog_size(insns)`` rounded up to pages (bpf_prog_alloc),
    which the verifier may only grow (bpf_prog_realloc when it patches in more)."""
    size = header + BPF_INSN_SIZE * insns
    return (size + page_size - 1) // page_size * page_size


@dataclass(frozen=True)
class ProgramBound:
    """One program of an object before load: its instructions after the loader's
    relocations (subprograms appended) and the memlock they imply, a lower bound."""
    name: str
    section: str
    insns: int
    memlock_at_least: int


def program_bounds(programs, profile) -> tuple[ProgramBound, ...]:
    """Each program (ProgramSpec) of an object before load on ``profile``'s kernel: the
    instructions a loader hands over (its own and, once each, the subprograms it calls) and
    the memlock they imply, a lower bound."""
    header = bpf_prog_header(profile.release)
    out = []
    for p in programs:
        n = p.insns + p.subprogram_insns
        out.append(ProgramBound(p.name, p.section, n,
                                memlock_lower_bound(n, profile.page_size, header)))
    return tuple(out)


@dataclass(frozen=True)
class ProgramChange:
    """One program between two builds (``diff --programs``): its relocated instructions and
    memlock lower bound on each side (None: not on that side)."""
    object: str
    name: str
    status: str                     # added | removed | changed | unchanged
    old_insns: int | None
    new_insns: int | None
    old_at_least: int | None
    new_at_least: int | None

    @property
    def delta_at_least(self) -> int:
        return (self.new_at_least or 0) - (self.old_at_least or 0)


def program_changes(old, new, profile) -> tuple[ProgramChange, ...]:
    """The programs of two builds (ObjectSpec lists with programs read), matched by object
    and program name, with the lower bounds on ``profile``'s kernel."""
    def side(objs):
        out = {}
        for o in objs:
            for b in program_bounds(o.programs or (), profile):
                out[(o.name, b.name)] = b
        return out
    a, b = side(old), side(new)
    rows = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        status = ("added" if x is None else "removed" if y is None else
                  "changed" if x.insns != y.insns else "unchanged")
        rows.append(ProgramChange(key[0], key[1], status, x and x.insns, y and y.insns,
                                  x and x.memlock_at_least, y and y.memlock_at_least))
    return tuple(rows)


# ---- measured (bpfmem measure --programs) ----

@dataclass(frozen=True)
class MeasuredProg:
    """One program of an object loaded alone for real (host/progmeasure.py): the kernel's
    figures, the cgroup's charge for it (its load's charge minus the maps-only load's) and
    the peak of its load; or, refused, the kernel's reason."""
    name: str
    section: str
    loaded: bool
    memlock: int | None = None
    jited_prog_len: int | None = None
    xlated_prog_len: int | None = None
    insn_cnt: int | None = None       # the instructions libbpf handed over (relocated)
    verified_insns: int | None = None
    charged: int | None = None        # bytes: end - the maps-only load's end
    end: int | None = None            # bytes charged by its whole load (maps, BTF too)
    peak: int | None = None           # bytes: the load's peak above the reading before
    errno: int | None = None
    reason: str | None = None         # the verifier log's last lines (refused)

    @property
    def transient(self) -> int | None:
        """Charged during the load and given back by its end (the verifier's working
        memory, libbpf's probes): peak - end."""
        if self.peak is None or self.end is None:
            return None
        return max(self.peak - self.end, 0)


@dataclass(frozen=True)
class LoadPhase:
    ok: bool
    errno: int
    charged: int | None      # bytes at the end of the load, above the reading before
    peak: int | None         # the cgroup's kernel-memory peak during the load, above it


@dataclass(frozen=True)
class ProgramsMeasured:
    """Every program of an object measured: the maps-only load, the whole object's load
    (as an agent does it) and each program alone."""
    counter: str                   # which cgroup counter (memory.kmem.usage_in_bytes, ...)
    peak_counter: str | None
    maps: LoadPhase
    whole: LoadPhase
    programs: tuple[MeasuredProg, ...]

    @property
    def loaded(self) -> tuple[MeasuredProg, ...]:
        return tuple(p for p in self.programs if p.loaded)

    @property
    def refused(self) -> tuple[MeasuredProg, ...]:
        return tuple(p for p in self.programs if not p.loaded)

    @property
    def memlock(self) -> int:
        return sum(p.memlock or 0 for p in self.loaded)

    @property
    def charged(self) -> int:
        """The programs' charges summed (each loaded alone)."""
        return sum(p.charged or 0 for p in self.loaded)


def _opt(rec, key):
    v = rec.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _phase(rec) -> LoadPhase:
    return LoadPhase(bool(rec.get("ok")), int(rec.get("errno") or 0), _opt(rec, "charged"),
                     _opt(rec, "peak"))


def programs_measured(header, lines) -> ProgramsMeasured:
    """A :class:`ProgramsMeasured` from the probe's header and result lines."""
    phases = {r.get("phase"): r for r in lines if r.get("kind") == "phase"}
    progs = []
    for r in lines:
        if r.get("kind") != "prog":
            continue
        if r.get("loaded"):
            progs.append(MeasuredProg(
                r["name"], r.get("section", ""), True, memlock=_opt(r, "memlock"),
                jited_prog_len=_opt(r, "jited_prog_len"),
                xlated_prog_len=_opt(r, "xlated_prog_len"), insn_cnt=_opt(r, "insn_cnt"),
                verified_insns=_opt(r, "verified_insns"), charged=_opt(r, "charged"),
                end=_opt(r, "end"), peak=_opt(r, "peak")))
        else:
            progs.append(MeasuredProg(r["name"], r.get("section", ""), False,
                                      errno=_opt(r, "errno"), reason=r.get("reason") or None))
    none = {"ok": False, "errno": 0}
    return ProgramsMeasured(counter=header.get("counter", ""), peak_counter=header.get("peak"),
                            maps=_phase(phases.get("maps", none)),
                            whole=_phase(phases.get("all", none)), programs=tuple(progs))
