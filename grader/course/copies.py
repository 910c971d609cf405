"""Copies in a class: identical submissions and near copies, as hints for a person to look at.

    find_copies(submissions, starter) -> Copies     pure: learner -> files in, data out

Identical: learners whose own files (those that differ from the starter's file of that name) are
the same bytes, grouped by a content hash of those files. Learners who handed in the starter
unchanged share its hash, but copied nothing: they are counted (`unchanged_starter`), not grouped.

Near copies: winnowing as MOSS does it, by the well-kept `copydetect` (CodeFingerprint and
compare_files): each file's code is tokenized with names, strings and comments replaced or
dropped (so renamed variables still match), its k-grams of COPY_NOISE_CHARS characters hashed and
winnowed (any match of COPY_GUARANTEE_CHARS is found), and the starter's own k-grams removed as
boilerplate, so starter lines never count. Files are compared with the file of the same name.
A pair's similarity in one direction is the share of one learner's own code (all their files,
starter excluded) that is also in the other's; a pair is listed when the larger of the two
reaches NEAR_COPY_SIMILARITY and at least NEAR_COPY_MIN_CHARS of normalised code match
(grader/limits.py). Pairs already identical are listed as identical, not again as near.

Cost: one fingerprint per distinct submission's file (copydetect's Pygments tokenizing is most
of it); every pair of distinct submissions intersects their fingerprint sets, and only pairs
sharing at least half the threshold's share of fingerprints have their overlap counted (`overlap`:
compare_files' count, without its slices); compare_files itself runs only for the pairs shown
side by side. benchmarks/bench_copies.py times classes of 30 and 300 with 5 files each.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from itertools import combinations

from grader.limits import (
    COPY_GUARANTEE_CHARS,
    COPY_NOISE_CHARS,
    COPY_VIEWS,
    NEAR_COPY_MIN_CHARS,
    NEAR_COPY_SIMILARITY,
)

Files = Mapping[str, bytes]


@dataclass(frozen=True)
class IdenticalGroup:
    digest: str  # the content hash of their own files
    learners: tuple[str, ...]
    files: tuple[str, ...]  # the file names that differ from the starter


@dataclass(frozen=True)
class FileMatch:
    """One file of a near-copy pair: the share of each side's own code in that file found in the
    other's, and (for the pairs shown side by side) the matching regions of each side, as
    (start, end) character offsets into code_text() of that learner's file."""

    name: str
    a_similarity: float
    b_similarity: float
    a_regions: tuple[tuple[int, int], ...] = ()
    b_regions: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class NearPair:
    a: str
    b: str
    a_similarity: float  # the share of a's own code that is also in b's
    b_similarity: float  # the share of b's own code that is also in a's
    matched_chars: int  # normalised code of a's found in b's
    files: tuple[FileMatch, ...]

    @property
    def similarity(self) -> float:
        return max(self.a_similarity, self.b_similarity)


@dataclass(frozen=True)
class Copies:
    identical: list[IdenticalGroup] = field(default_factory=list)
    near: list[NearPair] = field(default_factory=list)
    unchanged_starter: list[str] = field(default_factory=list)
    threshold: float = NEAR_COPY_SIMILARITY

    @property
    def learners(self) -> set[str]:
        """Every learner in a group or a pair: what a course overview counts."""
        return {w for g in self.identical for w in g.learners} | {w for p in self.near for w in (p.a, p.b)}


def code_text(data: bytes) -> str:
    """A learner file as the text fingerprinted and shown: UTF-8, undecodable bytes replaced."""
    return data.decode("utf-8", "replace")


def own_files(files: Files, starter: Files) -> dict[str, bytes]:
    """The files that are the learner's own: those not byte-identical to the starter's file."""
    return {name: data for name, data in files.items() if starter.get(name) != data}


def content_digest(files: Files) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode("utf-8", "surrogatepass") + b"\0" + files[name] + b"\0")
    return h.hexdigest()


def find_copies(
    submissions: Mapping[str, Files],
    starter: Files,
    *,
    threshold: float = NEAR_COPY_SIMILARITY,
    min_chars: int = NEAR_COPY_MIN_CHARS,
    views: int = COPY_VIEWS,
) -> Copies:
    """Identical groups and near-copy pairs among `submissions` (learner -> file name -> bytes),
    with `starter` (file name -> bytes) as boilerplate. Sorted: groups largest first, pairs most
    similar first, then by learner; the first `views` pairs carry their matching regions (for a
    side-by-side view), the others their similarities only."""
    own = {who: own_files(files, starter) for who, files in submissions.items()}
    unchanged = sorted(who for who, files in own.items() if not files and submissions[who])
    by_digest: dict[str, list[str]] = {}
    for who in sorted(own):
        if own[who]:
            by_digest.setdefault(content_digest(own[who]), []).append(who)
    identical = sorted(
        (
            IdenticalGroup(d, tuple(ws), tuple(sorted(own[ws[0]])))
            for d, ws in by_digest.items()
            if len(ws) > 1
        ),
        key=lambda g: (-len(g.learners), g.learners),
    )
    prints = fingerprints({d: own[ws[0]] for d, ws in by_digest.items()}, starter)
    near = near_pairs(prints, threshold=threshold, min_chars=min_chars)
    held = {who: d for d, ws in by_digest.items() for who in ws}
    pairs = [_relabel(p, a, b) for p in near for a in by_digest[p.a] for b in by_digest[p.b]]
    pairs.sort(key=lambda p: (-p.similarity, p.a, p.b))
    pairs[:views] = [with_regions(p, prints[held[p.a]], prints[held[p.b]]) for p in pairs[:views]]
    return Copies(identical=identical, near=pairs, unchanged_starter=unchanged, threshold=threshold)


def _relabel(p: NearPair, a: str, b: str) -> NearPair:
    """The pair between two distinct contents, as the pair of two learners holding them (a first
    in sort order, so a pair reads the same whichever content came first)."""
    if a <= b:
        return NearPair(a, b, p.a_similarity, p.b_similarity, p.matched_chars, p.files)
    flipped = tuple(FileMatch(f.name, f.b_similarity, f.a_similarity) for f in p.files)
    return NearPair(b, a, p.b_similarity, p.a_similarity, p.matched_chars, flipped)


@cache
def language_of(name: str) -> str | None:
    """The Pygments lexer copydetect tokenizes a file named `name` with (None: not tokenized),
    looked up once per name: the lookup by file name costs more than tokenizing a short file."""
    from pygments.lexers import find_lexer_class_for_filename

    lexer = find_lexer_class_for_filename(name)
    return lexer.aliases[0] if lexer is not None and lexer.aliases else None


def fingerprint(name: str, text: str, boilerplate=None):
    """copydetect's fingerprint of one file's text (the name picks the tokenizer by extension)."""
    from copydetect import CodeFingerprint

    window = COPY_GUARANTEE_CHARS - COPY_NOISE_CHARS + 1
    return CodeFingerprint(
        name,
        COPY_NOISE_CHARS,
        window,
        boilerplate=boilerplate,
        language=language_of(name),
        fp=io.StringIO(text),
    )


def boilerplate_hashes(starter: Files) -> dict[str, object]:
    """file name -> every k-gram hash of the starter's file (window 1, as copydetect does for
    boilerplate): removed from the learners' fingerprints of that file."""
    import numpy as np

    return {
        name: np.unique(np.array(sorted(fingerprint(name, code_text(data)).hashes), dtype=np.int64))
        for name, data in starter.items()
    }


@dataclass(frozen=True)
class Print:
    """One file's copydetect fingerprint, and its hashes and their positions as Python ints (the
    pairwise loop's sets and sorts are much faster on them than on numpy scalars)."""

    fp: object
    hashes: frozenset[int]
    positions: dict[int, list[int]]
    coverage: int  # copydetect's token_coverage: the normalised characters the hashes cover


def fingerprints(contents: Mapping[str, Files], starter: Files) -> dict[str, dict[str, Print]]:
    """content key -> file name -> Print, with the starter's file of that name as boilerplate."""
    logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))  # "not tokenized"
    boiler = boilerplate_hashes(starter)
    out: dict[str, dict[str, Print]] = {}
    for key, files in contents.items():
        out[key] = {}
        for name, data in sorted(files.items()):
            fp = fingerprint(name, code_text(data), boiler.get(name))
            positions = {int(h): sorted(int(i) for i in idx) for h, idx in fp.hash_idx.items()}
            out[key][name] = Print(fp, frozenset(positions), positions, int(fp.token_coverage))
    return out


def overlap(a: Print, b: Print, k: int = COPY_NOISE_CHARS) -> tuple[int, int]:
    """The normalised characters of a's code and of b's that their shared fingerprints cover:
    copydetect's compare_files token overlap (its slices merge positions less than k apart,
    each slice ending k after its last position), without building the slices."""
    shared = a.hashes & b.hashes
    return _covered([i for h in shared for i in a.positions[h]], k), _covered(
        [i for h in shared for i in b.positions[h]], k
    )


def _covered(positions: list[int], k: int) -> int:
    if not positions:
        return 0
    positions.sort()
    total, start, last = 0, positions[0], positions[0]
    for i in positions[1:]:
        if i - last > k - 1:
            total += last + k - start
            start = i
        last = i
    return total + last + k - start


def near_pairs(
    prints: Mapping[str, Mapping[str, Print]], *, threshold: float, min_chars: int
) -> list[NearPair]:
    """Every pair of contents whose similarity (module docstring) reaches `threshold`."""
    coverage = {key: sum(p.coverage for p in files.values()) for key, files in prints.items()}
    hashes = {key: sum(len(p.hashes) for p in files.values()) for key, files in prints.items()}
    out = []
    for a, b in combinations(sorted(prints), 2):
        if not coverage[a] or not coverage[b]:
            continue
        names = sorted(prints[a].keys() & prints[b].keys())
        shared = sum(len(prints[a][n].hashes & prints[b][n].hashes) for n in names)
        if shared < threshold / 2 * min(hashes[a], hashes[b]):
            continue  # the prefilter: far from the threshold either way
        matched_a = matched_b = 0
        files = []
        for name in names:
            pa, pb = prints[a][name], prints[b][name]
            in_a, in_b = overlap(pa, pb)
            matched_a, matched_b = matched_a + in_a, matched_b + in_b
            if in_a:
                files.append(FileMatch(name, in_a / pa.coverage, in_b / pb.coverage))
        sim_a, sim_b = min(1.0, matched_a / coverage[a]), min(1.0, matched_b / coverage[b])
        if max(sim_a, sim_b) >= threshold and min(matched_a, matched_b) >= min_chars:
            out.append(NearPair(a, b, sim_a, sim_b, matched_a, tuple(files)))
    return out


def with_regions(pair: NearPair, a: Mapping[str, Print], b: Mapping[str, Print]) -> NearPair:
    """The pair with each file's matching regions, as copydetect's compare_files slices them
    (character offsets into each side's code_text)."""
    from copydetect import compare_files

    files = []
    for f in pair.files:
        _, _, (slices_a, slices_b) = compare_files(a[f.name].fp, b[f.name].fp)
        files.append(
            FileMatch(f.name, f.a_similarity, f.b_similarity, _regions(slices_a), _regions(slices_b))
        )
    return NearPair(pair.a, pair.b, pair.a_similarity, pair.b_similarity, pair.matched_chars, tuple(files))


def _regions(slices) -> tuple[tuple[int, int], ...]:
    if not slices.size:
        return ()
    return tuple((int(s), int(e)) for s, e in zip(slices[0], slices[1], strict=True))


def segments(text: str, regions, limit: int) -> list[tuple[str, bool]]:
    """`text` (its first `limit` characters) cut into (piece, matched) in order, for a side-by-side
    view that highlights the matching regions."""
    text = text[:limit]
    out: list[tuple[str, bool]] = []
    at = 0
    for start, end in sorted(regions):
        start, end = max(start, at), min(end, len(text))
        if start >= end:
            continue
        if start > at:
            out.append((text[at:start], False))
        out.append((text[start:end], True))
        at = end
    if at < len(text):
        out.append((text[at:], False))
    return out
