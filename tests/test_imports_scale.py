"""issue 30: `--go-src` was quadratic in the package graph (6,000 packages: 48 s): a walk of
the dominator subtree and a breadth-first search per import edge, and every pair of savings
compared. Now one pass over the dominator tree, one search, and the tree of that search:
a saving's chain is made only when read (a chain-shaped graph of 6,000 packages held 18 M
names in its savings' chains, ~60 s under load). Here: the answers are those of the old rules
(kept below as the reference: a reachability walk without each edge, a search per chain,
every pair of savings) on random graphs, and a saving lists at most TOP_PACKAGES packages
while counting them all."""

from __future__ import annotations

import json
import random

import pytest

from dataclasses import replace

from bpfmem.analysis.imports import (TOP_PACKAGES, Chain, chain_to, deepest, import_savings,
                                     why_linked)
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


def _reachable(g, skip=None) -> set:
    seen, stack = {g.main}, [g.main]
    while stack:
        a = stack.pop()
        for b in g.packages[a].imports:
            if b in g.packages and b not in seen and (a, b) != skip:
                seen.add(b)
                stack.append(b)
    return seen


def _old_chain(g, target):
    """A breadth-first search of its own (imports in their order) to ``target``."""
    from collections import deque
    prev, q = {g.main: None}, deque([g.main])
    while q:
        a = q.popleft()
        for b in g.packages[a].imports:
            if b in g.packages and b not in prev:
                prev[b] = a
                q.append(b)
    out, cur = [], target
    while cur is not None:
        out.append(cur)
        cur = prev[cur]
    return tuple(reversed(out))


def _old_savings(g, weights):
    """Per import edge: the packages no longer reachable without it, their bytes and
    count, the largest TOP_PACKAGES of them, and a shortest chain."""
    every = _reachable(g)
    out = []
    for a, b in g.edges():
        if a not in every:
            continue
        lost = every - _reachable(g, (a, b))
        saves = sum(max(weights.get(p, 0), 0) for p in lost)
        if saves <= 0:
            continue
        heavy = sorted((-weights.get(p, 0), p) for p in lost if weights.get(p, 0) > 0)
        out.append((a, b, saves, tuple(p for _w, p in heavy[:TOP_PACKAGES]), len(heavy),
                    _old_chain(g, a) + (b,)))
    out.sort(key=lambda t: (-t[2], t[0], t[1]))
    return out


def _plain(savings):
    """The same savings with their chains as tuples of names (the trie's way)."""
    return [replace(s, chain=tuple(s.chain)) for s in savings]


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
    assert [(s.importer, s.imported, s.saves, s.packages, s.count, tuple(s.chain))
            for s in got] == _old_savings(g, weights)
    assert deepest(got) == _old_deepest(got) == deepest(_plain(got))
    some = [s for i, s in enumerate(got) if i % 3]          # a filtered list, as why_linked
    assert deepest(some) == _old_deepest(some) == deepest(_plain(some))


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


def test_a_chain_of_6000_makes_only_the_printed_chains():
    """A chain-shaped graph of 6,000 packages: each saving's chain is as long as its place
    in the chain (18 M names in all). None is made by the analysis or by deepest(); the
    ones why_linked keeps are made when read, and equal the search's."""
    g, weights = _graph(6000, 1, 3, chain=True)
    got = import_savings(g, weights)
    assert len(got) == sum(1 for i in range(1, 6000) if any(
        weights[f"ex/p{j}"] > 0 for j in range(i, 6000)))
    kept = deepest(got)
    why = why_linked(g, got, weights)
    assert all(isinstance(s.chain, Chain) and s.chain._names is None for s in got)
    assert len(why.savings) == 10 and {id(s) for s in why.savings} <= {id(s) for s in kept}
    deep = max(got, key=lambda s: len(s.chain))
    assert len(deep.chain) == 6000 and deep.chain._names is None
    assert deep.chain == chain_to(g, deep.importer) + (deep.imported,)
    assert list(deep.chain)[-2:] == [deep.importer, deep.imported]


@pytest.mark.parametrize("seed", range(3))
def test_deepest_on_a_chain_with_side_imports_is_the_old_rules(seed):
    """A long chain with random side imports (shortcuts and leaves): deepest() placed in
    the search's tree equals the trie of names and the pairwise rule."""
    rnd = random.Random(seed)
    objs = []
    n = 300
    for i in range(n):
        imps = [f"ex/p{i + 1}"] if i + 1 < n else []
        imps += [f"ex/p{j}" for j in rnd.sample(range(i + 1, n), min(rnd.randrange(3),
                                                                      n - i - 1))]
        objs.append({"ImportPath": f"ex/p{i}", "Imports": list(dict.fromkeys(imps)),
                     **({"Name": "main"} if i == 0 else {})})
    g = parse_go_list("".join(json.dumps(o) + "\n" for o in reversed(objs)))
    weights = {f"ex/p{i}": rnd.randrange(0, 5000) for i in range(n)}
    got = import_savings(g, weights)
    assert deepest(got, 0.5) == _old_deepest(got, 0.5) == deepest(_plain(got), 0.5)
    assert deepest(got) == _old_deepest(got) == deepest(_plain(got))


def test_a_long_chain_prints_its_ends_and_counts_the_rest():
    """Text, markdown and HTML show a chain of 6,000 names as its first and last
    CHAIN_ENDS names and the count between (one line of 6,000 names before); JSON keeps
    every name; a short chain is printed whole."""
    from bpfmem.report.size import CHAIN_ENDS, _why_lines, chain_words
    from bpfmem.report.documents import _why_linked
    g, weights = _graph(6000, 1, 3, chain=True)
    why = why_linked(g, import_savings(g, weights), weights)
    deep = max(why.savings, key=lambda s: len(s.chain))
    words = chain_words(deep.chain)
    names = list(deep.chain)
    assert words.split(" -> ") == (names[:CHAIN_ENDS]
                                   + [f"... ({len(names) - 2 * CHAIN_ENDS} more) ..."]
                                   + names[-CHAIN_ENDS:])
    text = _why_lines(why, None)
    assert f"    chain: {words}" in text and max(len(line) for line in text) < 400
    md = _why_lines(why, None, md=True)
    assert any(f"chain: `{words}`" in line for line in md)
    assert _why_linked(why)["savings"][[s is deep for s in why.savings].index(True)][
        "chain"] == names
    short = ("main", "a", "b")
    assert chain_words(short) == "main -> a -> b"
    nine = tuple(f"p{i}" for i in range(2 * CHAIN_ENDS + 1))
    assert chain_words(nine) == " -> ".join(nine)
