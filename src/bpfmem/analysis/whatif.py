"""What-if: change map specs before estimating them.

``--set`` expressions (globs on map names):
  MAP.max_entries=N          MAP.key_size=N   MAP.value_size=N
  MAP.flags+=no_prealloc     MAP.flags-=no_prealloc     MAP.flags=no_prealloc,numa_node
  MAP.count=110              the agent creates this map 110 times (per endpoint, per pod)
and Cilium-style dynamic sizing: maps a config names get max_entries from the node's memory
(``entries = default * ratio * node_memory / sum(default_i * (key_i + value_i))``, clamped to
each map's minimum and the global maximum, as Cilium's ``calculateDynamicBPFMapSizes``).
"""

from __future__ import annotations

import fnmatch
from ..values import dataclass, field, replace

from ..errors import WhatIfError
from ..uapi import parse_flags
from ..units import parse_size

_ATTRS = frozenset({"max_entries", "key_size", "value_size", "flags", "map_flags", "count",
                    "map_extra"})


def _split_setting(text: str) -> tuple[str, str, str, str] | None:
    """(glob, attr, op, value) of ``GLOB.ATTR OP VALUE``, or None. Linear in the length
    (string methods, no backtracking regex): a 40k-character value costs microseconds."""
    eq = text.find("=")
    if eq < 1:
        return None
    op = text[eq - 1] + "=" if text[eq - 1] in "+-" else "="
    left = text[:eq - len(op) + 1].strip()
    value = text[eq + 1:].strip()
    glob, dot, attr = left.rpartition(".")
    attr = attr.rstrip()
    if not dot or not glob or attr not in _ATTRS or not value:
        return None
    if glob[0] in "=+-" or glob[0].isspace() or glob != glob.rstrip():
        return None
    return glob, attr, op, value


@dataclass(frozen=True)
class Setting:
    glob: str
    attr: str
    op: str
    value: int

    def __str__(self) -> str:
        if self.attr == "flags":
            from ..uapi import flag_names
            return f"{self.glob}.flags{self.op}{','.join(flag_names(self.value)) or '0'}"
        return f"{self.glob}.{self.attr}{self.op}{self.value}"


def parse_setting(text: str) -> Setting:
    """One what-if expression (``MAP.attr=VALUE``: the CLI's ``--set``). A WhatIfError (a
    ValueError) says what is wrong."""
    parts = _split_setting(text)
    shown = text if len(text) <= 60 else text[:57] + "..."
    if parts is None:
        raise WhatIfError(WhatIfError.SETTING, "use MAP.max_entries=N, MAP.flags+=no_prealloc, "
                          "MAP.flags-=..., MAP.count=N (MAP may be a glob like 'service_*')",
                          shown)
    glob, attr, op, raw = parts
    attr = "flags" if attr == "map_flags" else attr
    text = shown
    if attr == "flags":
        value = parse_flags(raw)
    else:
        if op != "=":
            raise WhatIfError(WhatIfError.SETTING, f"{attr} takes '=' only", text)
        try:
            value = int(raw, 0) if len(raw) <= 40 else None
        except ValueError:
            value = None
        if value is None:
            raise WhatIfError(WhatIfError.SETTING, f"{raw[:40]!r} is not a number",
                              text) from None
        if value < 0 or (attr != "map_extra" and value > 0xFFFFFFFF):
            raise WhatIfError(WhatIfError.SETTING, f"{value} is out of range", text)
    return Setting(glob, attr, op, value)


@dataclass(frozen=True)
class DynamicSizing:
    """Cilium's dynamic map sizing: ``--size-ratio`` of ``--node-memory`` spread over maps."""

    ratio: float
    node_memory: int
    maps: dict[str, tuple[int, int]] = field(default_factory=dict)   # name -> (default, min)
    maximum: int = 1 << 24

    def entries(self, sizes: dict[str, int]) -> dict[str, int]:
        """max_entries per dynamically sized map; ``sizes`` gives key+value bytes per map."""
        present = {n: d for n, d in self.maps.items() if n in sizes}
        total_default = sum(default * sizes[n] for n, (default, _min) in present.items())
        if not total_default:
            return {}
        available = int(self.node_memory * self.ratio)
        out = {}
        for name, (default, minimum) in present.items():
            e = default * available // total_default
            out[name] = max(minimum, min(e, self.maximum))
        return out


@dataclass(frozen=True)
class WhatIf:
    settings: tuple[Setting, ...] = ()
    dynamic: DynamicSizing | None = None

    def __bool__(self) -> bool:
        return bool(self.settings) or self.dynamic is not None

    def describe(self) -> list[str]:
        out = [str(s) for s in self.settings]
        if self.dynamic is not None:
            d = self.dynamic
            out.append(f"dynamic sizing: ratio {d.ratio} of {d.node_memory} bytes over "
                       f"{', '.join(sorted(d.maps)) or 'no maps'}")
        return out

    def apply(self, maps) -> list[tuple[object, int]]:
        """(changed MapSpec, count) for each map; specs are frozen, so new ones are made."""
        out = []
        dyn = {}
        if self.dynamic is not None:
            dyn = self.dynamic.entries({m.name: m.key_size + m.value_size for m in maps})
        for m in maps:
            count = 1
            if m.name in dyn:
                m = replace(m, max_entries=dyn[m.name], max_entries_set_at_load=False)
            for s in self.settings:
                if not fnmatch.fnmatchcase(m.name, s.glob):
                    continue
                if s.attr == "count":
                    count = s.value
                elif s.attr == "flags":
                    flags = (m.map_flags | s.value if s.op == "+=" else
                             m.map_flags & ~s.value if s.op == "-=" else s.value)
                    m = replace(m, map_flags=flags)
                elif s.attr == "max_entries":
                    m = replace(m, max_entries=s.value, max_entries_set_at_load=False)
                else:
                    m = replace(m, **{s.attr: s.value})
            out.append((m, count))
        return out

    def unmatched(self, names: list[str]) -> list[str]:
        """Settings whose glob matches no map: almost always a typo."""
        return [str(s) for s in self.settings if self.unmatched_one(s, names)]

    @staticmethod
    def unmatched_one(setting: Setting, names: list[str]) -> bool:
        return not any(fnmatch.fnmatchcase(n, setting.glob) for n in names)


def whatif_from(sets=(), size_ratio: float | None = None, node_memory=None,
                dynamic_config: dict | None = None) -> WhatIf:
    """A WhatIf from ``--set`` expressions and Cilium-style dynamic sizing settings (the
    command line's ``--size-ratio``/``--node-memory`` over bpfmem.toml's ``[dynamic]``)."""
    settings = tuple(parse_setting(s) for s in sets)
    dyn = None
    cfg = dict(dynamic_config or {})
    ratio = size_ratio if size_ratio is not None else cfg.get("size_ratio")
    mem = node_memory if node_memory is not None else cfg.get("node_memory")
    if ratio is not None or mem is not None:
        if ratio is None or mem is None:
            raise WhatIfError(WhatIfError.DYNAMIC, "dynamic sizing needs both a size ratio and "
                              "the node's memory")
        maps = {name: (int(v["default"]), int(v.get("min", 0)))
                for name, v in cfg.get("maps", {}).items()}
        if not maps:
            raise ValueError("dynamic sizing needs the maps it sizes: [dynamic.maps] in "
                             "bpfmem.toml, e.g. ct_tcp = { default = 524288, min = 131072 }")
        dyn = DynamicSizing(float(ratio), parse_size(mem), maps,
                            int(cfg.get("max", 1 << 24)))
    return WhatIf(settings, dyn)
