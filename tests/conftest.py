import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))               # elfgen and friends
sys.path.insert(0, str(HERE.parent / "src"))  # run from a checkout without installing

FIXTURES = HERE / "bpf" / "obj"
CILIUM_EXAMPLES = HERE / "data" / "cilium_examples"   # cilium/ebpf's committed bpf2go objects


def fixture_objects() -> list[Path]:
    """Every committed fixture object (little- and big-endian)."""
    return sorted(p for p in FIXTURES.glob("*.o"))


def is_root() -> bool:
    return os.geteuid() == 0


@contextmanager
def bpffs(prefix: str = "bpfmem-test-bpffs-"):
    """A scratch bpffs mount, unmounted and removed afterwards (also on failure)."""
    d = tempfile.mkdtemp(prefix=prefix)
    subprocess.run(["mount", "-t", "bpf", "bpf", d], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", d], check=False)
        os.rmdir(d)
