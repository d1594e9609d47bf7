"""``bpfmem measure``: create an object's maps for real and compare with the model."""

from __future__ import annotations

import argparse
import sys

from . import args as a
from .command import EXIT_OK, Command

EPILOG = ("examples:\n  bpfmem measure agent.bpf.o\n"
          "  bpfmem measure agent.bpf.o --fill            also fill maps to half and full\n"
          "  bpfmem measure agent.bpf.o --vm-kernel 6.1   on Debian's 6.1 under qemu\n"
          "  bpfmem measure agent.bpf.o --vm-kernel 6.1 --vm-cpus 4\n"
          "  bpfmem measure agent.bpf.o --vm-kernel /boot/vmlinuz-6.12.0-x\n"
          "  bpfmem measure agent.bpf.o --programs       also load its programs\n"
          "  bpfmem measure agent.bpf.o --programs --vm-kernel 6.1   ... in Debian's 6.1\n")


class Measure(Command):
    name = "measure"
    help = "create an object's maps for real and compare with the model"
    description = ("Create every map of the object for real in a scratch memory cgroup, "
                   "read memlock (fdinfo) and the cgroup's charge per map, print them beside "
                   "the model's prediction, and remove everything. Needs root.")
    epilog = EPILOG

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("object", metavar="OBJ",
                       help="a compiled BPF object, or a binary or container image carrying "
                            "some (all their maps)")
        p.add_argument("--fill", action="store_true",
                       help="also insert entries (half, then full) and measure again")
        p.add_argument("--vm-kernel", metavar="VERSION|VMLINUZ",
                       help="measure in a VM: 5.10, 6.1, 6.12 (Debian cloud kernels, "
                            "downloaded once and cached) or a vmlinuz path")
        p.add_argument("--vm-cpus", "--cpus", dest="cpus", type=a.positive, default=2,
                       metavar="N",
                       help="with --vm-kernel: the VM's CPUs, which are then the possible "
                            "CPUs the model is compared at (default 2); on this host the "
                            "host's own (unlike --cpus elsewhere, nothing is modelled at a "
                            "CPU count the kernel does not have)")
        p.add_argument("--programs", action="store_true",
                       help="also load the programs for real (libbpf; on this host, or in "
                            "the VM with --vm-kernel): "
                            "per program memlock, JIT size, the cgroup's charge and the peak "
                            "of its load; refused ones with the verifier's reason")
        a.add_format(p, ("table", "json"), help=None)
        a.add_loader(p)

    def run(self, args: argparse.Namespace) -> int:
        from .. import api
        from .common import config_of, loader_of, note_leftovers
        from .output import render
        note_leftovers()
        result = api.measure_object(args.object, vm_kernel=args.vm_kernel, fill=args.fill,
                                    cpus=args.cpus, loader=loader_of(args.loader, config_of(args)),
                                    programs=args.programs)
        render(result, args.format, sys.stdout)
        return EXIT_OK


COMMAND = Measure()
