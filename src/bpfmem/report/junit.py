"""JUnit XML of ``bpfmem check`` (a CheckResult): one suite per kernel/CPU profile, one test
case per check, so a test case is exactly one comparison and never contradicts another."""

from __future__ import annotations

from typing import IO

from ..units import format_size as fs


def check_junit(r, out: IO[str], *, timestamp: str | None = None, seconds: float = 0.0,
                hostname: str | None = None) -> None:
    """JUnit XML that validates against Jenkins xUnit's junit-10.xsd (and carries what Ant's
    schema requires too). ``timestamp`` (ISO 8601, no zone, as Ant writes it) and ``seconds``
    are when and how long the check ran."""
    import socket
    import xml.etree.ElementTree as ET
    from datetime import datetime, timezone
    if timestamp is None:
        timestamp = datetime.now(timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")
    hostname = hostname or socket.gethostname() or "localhost"
    b = r.budget
    results = r.results
    per_suite = f"{seconds / max(1, len(results)):.3f}"
    root = ET.Element("testsuites", name="bpfmem check",
                      tests=str(sum(len(p.checks) for p in results)),
                      failures=str(sum(1 for p in results for c in p.checks if not c.passed)),
                      errors="0", time=f"{seconds:.3f}")
    for i, p in enumerate(results):
        k = p.kernel
        suite = f"linux-{k.version}-{k.possible_cpus}cpus"
        ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(p.checks)),
                           failures=str(sum(1 for c in p.checks if not c.passed)),
                           errors="0", skipped="0", time=per_suite, timestamp=timestamp,
                           hostname=hostname, id=str(i), package="bpfmem")
        props = ET.SubElement(ts, "properties")
        for name, value in (("kernel", k.version), ("possible_cpus", k.possible_cpus),
                            ("limit", b.limit), ("max_fraction", b.max_fraction),
                            ("budget", b.budget), ("measure", b.measure)):
            ET.SubElement(props, "property", name=name, value=str(value))
        for c in p.checks:
            tc = ET.SubElement(ts, "testcase", classname=f"bpfmem.{suite}", name=c.name,
                               time="0")
            if not c.passed:
                msg = "; ".join(c.failures)
                ET.SubElement(tc, "failure", message=msg, type="bpfmem.budget").text = msg
            if c.value is not None:
                limit = f" (limit {fs(c.limit)})" if c.limit is not None else ""
                ET.SubElement(tc, "system-out").text = f"{fs(c.value)}{limit}"
        ET.SubElement(ts, "system-out").text = (f"maps charge {fs(p.total)} at "
                                                f"{'full' if b.full else 'create'}")
        ET.SubElement(ts, "system-err").text = ""
    ET.indent(root)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n")
