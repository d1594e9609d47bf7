"""``bpfmem size`` and ``bpfmem size diff``: what each package costs in a binary; and the
binary half of ``bpfmem check`` (``--max-binary-size``, ``[binary]`` in bpfmem.toml)."""

from __future__ import annotations

import argparse

from ..errors import UsageError
from . import args as a
from .command import EXIT_OK, Command

EPILOG = """what you see:
  Every byte of the file labelled once: the parts add up to the file size. "file" is bytes
  in the file, "memory" what the loader maps (.bss is memory only; debug info and symbol
  tables are file only). A binary's text is resident in every pod that runs it.
  Go binaries (Go 1.2 and later, stripped or not, PIE or not): functions from the runtime's
  pclntab, packages from the function names (Go's symbol grammar), modules from the build
  info; stripped (Go 1.18-1.19 layouts): type descriptors, itabs, funcdata and the data the
  code refers to by what the binary says; what stays unknown is a named bucket "(...)".
  Other ELF files (C, C++, Rust): sections and symbols (names demangled by running c++filt
  from PATH, if there is one).

why it is linked (Go, needs the source):
  --go-src DIR runs `go list -deps -json` in DIR (the main package's directory; `go` from
  BPFMEM_GO, else PATH) and ranks the imports by the bytes only they bring in: "dropping
  the import a -> b saves 5.2Mi".

examples:
  bpfmem size ./agent                          by package (largest first)
  bpfmem size ./agent --by module --top 0      every module
  bpfmem size ./agent --go-src ./cmd/agent     ... and which import to cut
  bpfmem size diff old/agent new/agent --format markdown      a pull-request comment
  bpfmem size diff old/agent new/agent --format html -o size.html --go-src ./cmd/agent
  bpfmem check ./agent --max-binary-size 40Mi                 CI gate (exit 1 if over,
                                                              3 if a binary cannot be read)
"""



class Size(Command):
    name = "size"
    help = "what each package costs in a binary; `size diff OLD NEW` between builds"
    description = ("Label every byte of each BINARY (Go or other ELF) and group the bytes by "
                   "package, module, section or symbol. `bpfmem size diff OLD NEW` shows what "
                   "grew and shrank between two builds.")
    epilog = EPILOG

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("binaries", nargs="+", metavar="BINARY",
                       help="binaries or container images (their binaries that carry BPF "
                            "objects); or `diff OLD NEW`")
        p.add_argument("--by", choices=("package", "module", "section", "symbol"),
                       default="package", help="group by (default: package)")
        p.add_argument("--top", type=int, default=30, metavar="N",
                       help="rows to show, the rest summed as one (0: all; default 30)")
        p.add_argument("--go-src", metavar="DIR",
                       help="the main package's source directory: show why packages are "
                            "linked and what dropping each import saves (runs `go list`: BPFMEM_GO "
                            "or the go on PATH)")
        a.add_platform(p)
        a.add_format(p, ("table", "json", "markdown", "html"),
                     help="output format (default: table; html is for `size diff`)")
        a.add_output_file(p)

    def run(self, args: argparse.Namespace) -> int:
        from .. import api
        paths = list(args.binaries)
        if paths[0] == "diff":
            if len(paths) != 3:
                raise UsageError("size diff needs exactly two binaries: OLD NEW")
            diff = api.binary_size_diff(paths[1], paths[2], by=args.by, top=args.top,
                                        go_src=args.go_src)
            _emit(diff, args.format, args.output)
            return EXIT_OK
        if args.format == "html":
            raise UsageError("--format html is for `size diff OLD NEW`")
        sizes = api.binary_size(paths, by=args.by, top=args.top, go_src=args.go_src,
                                platform=args.platform)
        _emit(sizes, args.format, args.output)
        return EXIT_OK


def _emit(result, fmt: str, output: str | None) -> None:
    """A size result (SizeResult, SizeDiff, BinaryCheck) drawn by its renderer for ``fmt``."""
    from .common import as_usage
    from .output import emit_result
    with as_usage():
        emit_result(result, fmt, output)


COMMAND = Size()
