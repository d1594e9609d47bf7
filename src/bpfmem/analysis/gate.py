"""The gates of ``bpfmem check``, composed: the settings every gate is judged by (one place
that says which gates were asked for) and the verdict of all of them together. Every gate
given is evaluated; the verdict fails when any one fails."""

from __future__ import annotations

from ..values import dataclass, field

from .budget import CheckResult

TYPE_CHECKING = False   # typing's flag without importing typing (start-up)

if TYPE_CHECKING:    # the binary gate's result: its module only when a binary is judged
    from .size import BinaryCheck


@dataclass(frozen=True)
class GateSettings:
    """What ``check`` judges, from the command line over bpfmem.toml: the maps budget
    (``limit`` x ``max_fraction``, at create or ``full``; per-object limits and per-map caps)
    and the binary sizes (``binary_max`` and the per-file and per-module limits)."""
    limit: int | None = None
    max_fraction: float = 1.0
    full: bool = False
    object_limits: dict[str, int] = field(default_factory=dict)
    map_caps: dict[str, int] = field(default_factory=dict)
    binary_max: int | None = None
    binary_files: dict[str, int] = field(default_factory=dict)
    binary_modules: dict[str, int] = field(default_factory=dict)
    binary_named: bool = False       # binary_max was given on the command line
    config: str | None = None        # the bpfmem.toml the settings came from, if any
    programs: bool = False           # the maps gate adds the programs' lower bound

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit <= 0:
            raise ValueError(f"the memory limit must be more than 0 bytes, not {self.limit}")
        if not 0 < self.max_fraction <= 1:
            raise ValueError(f"the share of the limit must be in (0, 1], not "
                             f"{self.max_fraction}")
        if self.binary_max is not None and self.binary_max <= 0:
            raise ValueError(f"the binary size limit must be more than 0 bytes, not "
                             f"{self.binary_max}")

    @property
    def maps_gate(self) -> bool:
        """A memory limit is set: the maps are judged against it."""
        return self.limit is not None

    @property
    def any_gate(self) -> bool:
        return self.maps_gate or self.binary_gate

    @property
    def binary_gate(self) -> bool:
        """A binary limit is set (a size for every binary, per file or per module)."""
        return (self.binary_max is not None or bool(self.binary_files)
                or bool(self.binary_modules))


@dataclass(frozen=True)
class GateResult:
    """Every gate ``check`` ran: the maps budget (:class:`CheckResult`) and the binary sizes
    (:class:`BinaryCheck`), each None when not asked for; passes when every one does."""
    maps: CheckResult | None
    binaries: BinaryCheck | None
    notes: tuple[str, ...] = ()

    @property
    def parts(self) -> tuple:
        return tuple(p for p in (self.maps, self.binaries) if p is not None)

    @property
    def passed(self) -> bool:
        return all(p.passed for p in self.parts)


def gate_inputs(settings: GateSettings, objects: list, binaries: list
                ) -> tuple[list, list, tuple[str, ...]]:
    """(what the maps gate reads, what the binary gate sizes, notes), given the inputs split
    into BPF objects (and anything else that is no ELF binary) and ELF binaries.

    - The maps gate reads the objects; with no object but binaries and a binary gate, it has
      nothing to read (said in a note); with neither, it reads every input (so a file that
      is no BPF object is refused by name).
    - The binary gate sizes the binaries; with none, every input when the size limit was
      named on the command line (a BPF object is a file with a size too), else nothing: the
      limits of bpfmem.toml's [binary] are for binaries."""
    notes: list[str] = []
    maps_in: list = []
    if settings.maps_gate:
        if objects:
            maps_in = list(objects)
        elif binaries and settings.binary_gate:
            notes.append("no BPF object among the inputs: the maps budget judged no map; "
                         "only the binary sizes were checked")
        else:
            maps_in = list(binaries)
    bins_in: list = []
    if settings.binary_gate:
        bins_in = list(binaries) or (list(objects) if settings.binary_named else [])
    return maps_in, bins_in, tuple(notes)
