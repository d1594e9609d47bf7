import os
import sys
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
