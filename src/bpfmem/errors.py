"""The one exception tree of bpfmem.

Only the CLI turns these into one-line messages and exit codes; library callers catch them.
"""

from __future__ import annotations


class BpfmemError(Exception):
    """Base of every error bpfmem raises on purpose."""


class UsageError(BpfmemError):
    """A bad argument, or a combination of arguments that does not go together, found after
    the parser accepted them (the CLI exits 2 with this one line)."""


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(32), 127)}


class ParseError(BpfmemError):
    """An object file (or a part of it) is not what it claims to be.

    Carries where: the file, the ELF section (or BTF part) and the byte offset, when known.
    """

    def __init__(self, what: str, *, section: str | None = None, offset: int | None = None,
                 path: str | None = None):
        self.what = what
        self.section = section
        self.offset = offset
        self.path = path
        super().__init__(self._format())

    def _format(self) -> str:
        where = []
        if self.section is not None:
            where.append(f"section {self.section}")
        if self.offset is not None:
            where.append(f"offset {self.offset:#x}")
        loc = f" ({', '.join(where)})" if where else ""
        prefix = f"{self.path}: " if self.path else ""
        # one line whatever the file holds: a name read from it (a section's, a map's) may
        # carry a newline or an escape, shown as \xNN
        return f"{prefix}{self.what}{loc}".translate(_CONTROL)

    def with_path(self, path: str) -> "ParseError":
        """The same error, naming the file it came from."""
        if self.path is not None:
            return self
        return ParseError(self.what, section=self.section, offset=self.offset, path=path)


class WhatIfError(BpfmemError, ValueError):
    """A what-if that is no valid one, as a value the CLI words (as a bad ``--set``, or the
    options dynamic sizing needs): ``kind`` :attr:`SETTING` (``setting``, one
    ``MAP.attr=VALUE`` expression as given, is wrong; ``problem`` says how) or
    :attr:`DYNAMIC` (dynamic sizing lacks the size ratio or the node's memory)."""

    SETTING = "setting"
    DYNAMIC = "dynamic"

    def __init__(self, kind: str, problem: str, setting: str | None = None):
        self.kind = kind
        self.problem = problem
        self.setting = setting
        super().__init__(f"bad setting {setting!r}: {problem}" if kind == self.SETTING
                         else problem)


class InputError(BpfmemError, OSError):
    """A file a user named cannot be read, or is not what its kind must be (a FIFO, a
    device, a directory, too large, not JSON...). Names the file. An OSError too: the file
    could not be used."""


class UnsupportedError(BpfmemError):
    """Something valid that bpfmem (or the named kernel) does not support."""

    def __init__(self, what: str, since: str | None = None):
        self.what = what
        self.since = since
        super().__init__(what if since is None else f"{what} (since {since})")


class HostError(BpfmemError):
    """The live system refused or failed an operation."""


class PermissionDenied(HostError):
    """An operation needs a capability the caller lacks."""

    def __init__(self, what: str, capability: str):
        self.capability = capability
        super().__init__(f"{what}: needs {capability} (run as root)")


class ObjectGone(HostError):
    """A kernel object (map, program) vanished while being inspected: skip it."""


class UnreadableInput(BpfmemError):
    """A gate could not judge an input (a binary that is missing, truncated or no ELF):
    not "over the limit". ``check`` exits 3 with it."""
