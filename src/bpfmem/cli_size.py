"""``bpfmem size`` and ``bpfmem size diff``, and the binary half of ``bpfmem check``
(``--max-binary-size``, ``[binary]`` in bpfmem.toml): thin shells over :mod:`bpfmem.api`."""

from __future__ import annotations

import argparse
import sys

from .cli_live import Usage

_EPILOG = """what you see:
  Every byte of the file labelled once: the parts add up to the file size. "file" is bytes
  in the file, "memory" what the loader maps (.bss is memory only; debug info and symbol
  tables are file only). A binary's text is resident in every pod that runs it.
  Go binaries (Go 1.2 and later, stripped or not, PIE or not): functions from the runtime's
  pclntab, packages from the function names, modules from the build info; the pclntab's
  shared tables and, when stripped, type and string data are named buckets "(...)".
  Other ELF files (C, C++, Rust): sections and symbols (demangled with c++filt if present).

why it is linked (Go, needs the source):
  --go-src DIR runs `go list -deps -json` in DIR (the main package's directory) and ranks
  the imports by the bytes only they bring in: "dropping the import a -> b saves 5.2Mi".

examples:
  bpfmem size ./agent                          by package (largest first)
  bpfmem size ./agent --by module --top 0      every module
  bpfmem size ./agent --go-src ./cmd/agent     ... and which import to cut
  bpfmem size diff old/agent new/agent --format markdown      a pull-request comment
  bpfmem size diff old/agent new/agent --format html -o size.html --go-src ./cmd/agent
  bpfmem check ./agent --max-binary-size 40Mi                 CI gate (exit 1 if over)
"""


def add_parsers(sub) -> None:
    s = sub.add_parser(
        "size", help="what each package costs in a binary; `size diff OLD NEW` between builds",
        description="Label every byte of each BINARY (Go or other ELF) and group the bytes by "
                    "package, module, section or symbol. `bpfmem size diff OLD NEW` shows what "
                    "grew and shrank between two builds.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("binaries", nargs="+", metavar="BINARY",
                   help="binaries; or `diff OLD NEW`")
    s.add_argument("--by", choices=("package", "module", "section", "symbol"),
                   default="package", help="group by (default: package)")
    s.add_argument("--top", type=int, default=30, metavar="N",
                   help="rows to show, the rest summed as one (0: all; default 30)")
    s.add_argument("--go-src", metavar="DIR",
                   help="the main package's source directory: show why packages are linked "
                        "and what dropping each import saves (runs `go list`)")
    s.add_argument("--format", choices=("table", "json", "markdown", "html"), default="table",
                   help="output format (default: table; html is for `size diff`)")
    s.add_argument("-o", "--output", metavar="FILE", help="write there instead of stdout")


def add_check_args(c: argparse.ArgumentParser) -> None:
    """The binary-size options of `bpfmem check`."""
    c.add_argument("--max-binary-size", metavar="SIZE",
                   help="CI gate on binaries (Go or ELF) given as OBJ: fail when one is larger "
                        "than SIZE, a Kubernetes quantity (40Mi; M is 10^6) "
                        "(limits per binary and per module in [binary] of bpfmem.toml)")


def _emit(doc: dict, fmt: str, output: str | None) -> None:
    from .report.size import render
    from .report.output import emit
    try:
        emit(output, lambda out: render(doc, fmt, out))
    except ValueError as e:
        raise Usage(str(e)) from None


def cmd_size(args: argparse.Namespace) -> int:
    from . import api
    paths = list(args.binaries)
    if paths[0] == "diff":
        if len(paths) != 3:
            raise Usage("size diff needs exactly two binaries: OLD NEW")
        doc = api.size_diff_document(paths[1], paths[2], by=args.by, top=args.top,
                                     go_src=args.go_src)
        _emit(doc, args.format, args.output)
        return 0
    if args.format == "html":
        raise Usage("--format html is for `size diff OLD NEW`")
    doc = api.size_document(paths, by=args.by, top=args.top, go_src=args.go_src)
    _emit(doc, args.format, args.output)
    return 0


def binary_gate_applies(args: argparse.Namespace, cfg, paths: list[str]) -> bool:
    """Whether `check` gates binary sizes: --max-binary-size, or every file is an ELF binary
    that is no BPF object and bpfmem.toml has [binary] limits."""
    if args.max_binary_size:
        return True
    if cfg.binary_max is None and not cfg.binary_modules and not cfg.binary_files:
        return False
    objects, binaries = split_binaries(paths)
    return bool(binaries) and not objects


def split_binaries(paths: list[str]) -> tuple[list[str], list[str]]:
    """(the rest, ELF binaries that are no BPF object) among ``paths``."""
    objects, binaries = [], []
    for p in paths:
        try:
            with open(p, "rb") as f:
                head = f.read(20)
        except OSError:
            objects.append(p)     # let the object path report it
            continue
        machine = int.from_bytes(head[18:20], "little" if head[5:6] != b"\x02" else "big")
        is_binary = head[:4] == b"\x7fELF" and machine != 247
        (binaries if is_binary else objects).append(p)
    return objects, binaries


def cmd_check_binaries(args: argparse.Namespace, cfg, binaries: list[str]) -> int:
    """The binary-size gate: exit 1 when a binary or a module glob is over its limit."""
    from . import api
    from .units import parse_size
    try:
        max_size = parse_size(args.max_binary_size) if args.max_binary_size else cfg.binary_max
    except ValueError as e:
        raise Usage(str(e)) from None
    if max_size is None and not cfg.binary_modules and not cfg.binary_files:
        raise Usage("the binary gate needs --max-binary-size (or [binary] in bpfmem.toml)")
    fmt = args.format
    if fmt == "html":
        raise Usage("the binary gate renders table, json, markdown or junit")
    doc = api.check_binaries(binaries, max_size=max_size, module_limits=cfg.binary_modules,
                             file_limits=cfg.binary_files)
    _emit(doc, fmt, args.output)
    return 0 if doc["pass"] else 1


COMMANDS = {"size": cmd_size}
