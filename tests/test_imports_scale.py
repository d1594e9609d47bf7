"""issue 30: `--go-src` was quadratic in the package graph (6,000 packages: 48 s): a walk of
the dominator subtree and a breadth-first search per import edge, and every pair of savings
compared. Now one pass over the dominator tree, one search, and a trie of the chains. Here:
the answers are those of the old rules (kept below as the reference) on random graphs, and a
saving lists at most TOP_PACKAGES packages while counting them all."""

from __future__ import annotations

import json
import random

import pytest

from bpfmem.analysis.imports import TOP_PACKAGES, chain_to, deepest, import_savings
from bpfmem.parse.golist import parse_go_list


def _graph(n: int, fanout: int, seed: int, chain: bool = False):
    rnd = random.Random(seed)
    objs = []
    for i in range(n):
        if chain:
            imps = [f"ex/p{i + 1}"] if i + 1 < n else []
        else:
            imps = [f"ex/p{j}" for j in rnd.sample(range(i + 1, n), min(fanout, n - i - 1))]
        objs.append({"ImportPath": f"ex/p{i}", "Imports": imps, **({"Name": "main"} if i == 0
                                                                    else {})})
    g = parse_go_list("".join(json.dumps(o) + "\n" for o in reversed(objs)))
    weights = {f"ex/p{i}": rnd.randrange(0, 5000) for i in range(n)}
    return g, weights


def _old_deepest(savings, share=0.95):
    keep = []
    for s in savings:
        implied = False
        for t in savings:
            if t is s or t.saves < share * s.saves or len(t.chain) <= len(s.chain):
                continue
            c = t.chain
            if any(c[i] == s.importer and c[i + 1] == s.imported for i in range(len(c) - 1)):
                implied = True
                break
        if not implied:
            keep.append(s)
    return keep


@pytest.mark.parametrize("seed", range(6))
def test_the_savings_are_those_of_the_old_rules(seed):
    g, weights = _graph(120, 1 + seed % 3, seed)
    got = import_savings(g, weights)
    for s in got:
        assert s.chain == chain_to(g, s.importer) + (s.imported,)
        assert s.saves == sum(weights[p] for p in s.packages) or s.count > TOP_PACKAGES
        assert len(s.packages) == min(s.count, TOP_PACKAGES)
        assert [weights[p] for p in s.packages] == sorted((weights[p] for p in s.packages),
                                                          reverse=True)
    assert deepest(got) == _old_deepest(got)
    some = [s for i, s in enumerate(got) if i % 3]          # a filtered list, as why_linked
    assert deepest(some) == _old_deepest(some)


def test_a_chain_of_packages_lists_the_largest_and_counts_all():
    g, weights = _graph(400, 1, 7, chain=True)
    got = import_savings(g, weights)
    first = next(s for s in got if s.importer == "ex/p0")
    with_bytes = [p for p in list(weights)[1:] if weights[p] > 0]
    assert first.count == len(with_bytes) and len(first.packages) == TOP_PACKAGES
    assert first.saves == sum(weights[p] for p in with_bytes)
    assert set(first.packages) == set(sorted(with_bytes, key=lambda p: (-weights[p], p))
                                      [:TOP_PACKAGES])
    assert deepest(got) == _old_deepest(got)
