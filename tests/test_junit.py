"""`bpfmem check --format junit` against Jenkins xUnit's junit-10.xsd (tests/data), and test
cases that never contradict each other."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bpfmem import api, cli

lxml_etree = pytest.importorskip("lxml.etree")

EXAMPLE = str(api.example_object_path())
SCHEMA = Path(__file__).resolve().parent / "data" / "junit-10.xsd"


def _schema():
    return lxml_etree.XMLSchema(lxml_etree.parse(str(SCHEMA)))


def _junit(capsys, *extra, cwd=None):
    rc = cli.main(["check", EXAMPLE, "--kernel", "6.18", "--cpus", "2,4", "--format", "junit",
                   *extra])
    return rc, capsys.readouterr().out


def test_the_schema_rejects_what_jenkins_rejects():
    schema = _schema()
    ok = b'<testsuites><testsuite name="s" tests="1" failures="0" errors="0">' \
         b'<testcase name="c"/></testsuite></testsuites>'
    assert schema.validate(lxml_etree.fromstring(ok))
    no_errors = ok.replace(b' errors="0"', b"")          # what bpfmem wrote before
    assert not schema.validate(lxml_etree.fromstring(no_errors))
    bad_time = ok.replace(b'errors="0"', b'errors="0" time="1.5s"')
    assert not schema.validate(lxml_etree.fromstring(bad_time))


@pytest.mark.parametrize("limit", ["128Mi", "32Mi"])      # one passes, one fails
def test_check_junit_validates(capsys, limit, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bpfmem.toml").write_text(
        '[objects]\ncni_datapath = "60Mi"\n[maps]\nconntrack_table = "16Mi"\n')
    rc, out = _junit(capsys, "--limit", limit, "--max-fraction", "0.5")
    doc = lxml_etree.fromstring(out.encode())
    schema = _schema()
    assert schema.validate(doc), schema.error_log
    assert rc == (0 if limit == "128Mi" and not doc.xpath("//failure") else 1)
    suites = doc.findall("testsuite")
    assert len(suites) == 2
    for s in suites:
        assert s.get("errors") == "0"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", s.get("timestamp"))
        assert float(s.get("time")) >= 0
        cases = s.findall("testcase")
        assert int(s.get("tests")) == len(cases)
        assert int(s.get("failures")) == len(s.findall("testcase/failure"))
        names = [c.get("name") for c in cases]
        assert len(names) == len(set(names))               # one test case per comparison
        assert any("within its cap" in n for n in names)
        assert any("within its own limit" in n for n in names)
    # the conntrack table (18 MiB) is over its 16 MiB cap on every profile: exactly that
    # case fails for it, and no case for the same comparison passes
    for s in suites:
        cap = [c for c in s.findall("testcase") if "conntrack_table: within its cap" in c.get("name")]
        assert len(cap) == 1 and cap[0].find("failure") is not None
    root = doc
    assert int(root.get("tests")) == len(doc.findall(".//testcase"))
    assert int(root.get("failures")) == len(doc.findall(".//failure"))


def test_check_json_checks_agree_with_failures(capsys, tmp_path, monkeypatch):
    import json
    monkeypatch.chdir(tmp_path)
    rc = cli.main(["check", EXAMPLE, "--kernel", "6.18", "--cpus", "2", "--limit", "64Mi",
                   "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    r = doc["results"][0]
    assert [f for c in r["checks"] for f in c["failures"]] == r["failures"]
    assert r["pass"] == all(c["pass"] for c in r["checks"]) and rc == (0 if r["pass"] else 1)
    budget = r["checks"][0]
    assert budget["value"] == r["total"] and budget["limit"] == r["budget"]
    assert budget["pass"] == (r["total"] <= r["budget"])
