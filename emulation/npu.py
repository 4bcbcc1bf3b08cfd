"""The emulated NPU's INT4 multiply-accumulate array: accumulator width and overflow rule.

A microcode build accumulates INT4 x INT4 products (each in [-56, 64]) in a B-bit register and
handles overflow one of three ways: wrap (two's complement), saturate at each step, or clamp
once at the end (a wide internal sum saturated when written back). The reduction runs in index
order. An overflow adapter tiles the reduction so no partial sum can leave the register and
sums the tile partials wide; `matmul(..., tile=T)` and `dot_runs(..., tile=T)` apply it.

Supply ripple (claim 10): above a unit's onset amplitude each MAC may latch a wrong sum
(`mac_error_rate`, `MacFaults`); the runtime's redundancy mode runs every matmul twice and votes
(`voted`), recomputing outputs where the copies disagree.

Speed: wrap and clamp-at-end only need the exact sum (float64 BLAS is exact for these
integers); per-step saturation needs the products, but only for outputs whose sum of |products|
can reach the register's limits, and of those only rows whose running sum really leaves the
range go through the saturating reduction (a log2(K)-deep tree of clip compositions).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Iterator

import numpy as np

log = logging.getLogger(__name__)

INT4_MIN, INT4_MAX = -8, 7
MAX_PRODUCT = 64  # (-8) x (-8)
# Rows of products gathered at once for per-step saturation (bounds memory, ~32 MiB of int32).
_GATHER_ELEMENTS = 1 << 23
# Reduction block over which running-sum bounds are computed before gathering products.
_SCREEN_BLOCK = 256


class OverflowRule(str, Enum):
    WRAP = "wrap"
    SATURATE = "saturate-each-step"
    CLAMP_END = "clamp-at-end"


@dataclass(frozen=True)
class Accumulator:
    """A B-bit signed accumulator register and what it does on overflow."""

    bits: int
    rule: OverflowRule

    def __post_init__(self) -> None:
        if not 8 <= self.bits <= 62:
            raise ValueError(f"accumulator width {self.bits} bits is outside 8..62")
        object.__setattr__(self, "rule", OverflowRule(self.rule))

    @property
    def lo(self) -> int:
        return -(1 << (self.bits - 1))

    @property
    def hi(self) -> int:
        return (1 << (self.bits - 1)) - 1

    def safe_tile(self) -> int:
        """Longest reduction no INT4 product sequence can overflow (what an adapter tiles to)."""
        return self.hi // MAX_PRODUCT


def _wrap(total: np.ndarray, acc: Accumulator) -> np.ndarray:
    return ((total - acc.lo) & ((1 << acc.bits) - 1)) + acc.lo


def _saturating_tree(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Per-step saturating sum of each row of `a`, starting from 0, in index order.

    Each element is the map x -> clip(x + a, lo, hi). Such maps compose into another clip map:
    g2(g1(x)) = clip(x + a1 + a2, clip(l1 + a2, l2, h2), clip(h1 + a2, l2, h2)), so the row is
    reduced pairwise in log2(K) vectorised steps. A run of n equal products is one element with
    a = n * p: for a monotone run, saturating at each step equals clipping once.
    """
    a = a.astype(np.int64, copy=True)
    low = np.full_like(a, lo)
    high = np.full_like(a, hi)
    while a.shape[1] > 1:
        if a.shape[1] % 2:  # pad with the identity map
            pad = ((0, 0), (0, 1))
            a, low, high = np.pad(a, pad), np.pad(low, pad, constant_values=lo), np.pad(high, pad, constant_values=hi)
        a1, a2 = a[:, 0::2], a[:, 1::2]
        l1, l2, h1, h2 = low[:, 0::2], low[:, 1::2], high[:, 0::2], high[:, 1::2]
        low = np.minimum(np.maximum(l1 + a2, l2), h2)
        high = np.minimum(np.maximum(h1 + a2, l2), h2)
        a = a1 + a2
    return np.minimum(np.maximum(a[:, 0], low[:, 0]), high[:, 0])


def reduce_rows(values: np.ndarray, acc: Accumulator | None, counts: np.ndarray | None = None) -> np.ndarray:
    """Accumulate each row of `values` (element j repeated counts[j] times) in index order.

    `acc=None` is the exact wide reference. Returns int64, one result per row.
    """
    values = np.asarray(values)
    terms = values.astype(np.int64) if counts is None else values.astype(np.int64) * counts
    total = terms.sum(axis=1)
    if acc is None:
        return total
    if acc.rule is OverflowRule.WRAP:
        return _wrap(total, acc)
    if acc.rule is OverflowRule.CLAMP_END:
        return np.clip(total, acc.lo, acc.hi)
    # Per-step saturation changes nothing unless a running sum leaves the range (for runs, the
    # extremes of a monotone run are at its ends, so checking run boundaries is enough).
    running = np.cumsum(terms, axis=1)
    leaves = (running.min(axis=1) < acc.lo) | (running.max(axis=1) > acc.hi)
    result = total.copy()
    if leaves.any():
        result[leaves] = _saturating_tree(terms[leaves], acc.lo, acc.hi)
    return result


class Int4Matrix:
    """An INT4 weight matrix (K x N) prepared for the NPU: int8 codes plus the float views BLAS uses."""

    def __init__(self, codes: np.ndarray) -> None:
        codes = np.asarray(codes)
        if codes.ndim != 2:
            raise ValueError("an Int4Matrix is 2-D (K x N)")
        if codes.size and (codes.min() < INT4_MIN or codes.max() > INT4_MAX):
            raise ValueError("INT4 codes must be in [-8, 7]")
        self.codes = codes.astype(np.int8)
        self.codes_t = np.ascontiguousarray(self.codes.T)  # N x K rows for product gathers
        # float32 BLAS is exact while every partial sum stays below 2^24 (half the memory traffic).
        self.dtype = np.float32 if codes.shape[0] * MAX_PRODUCT < (1 << 24) else np.float64
        self.exact = self.codes.astype(self.dtype)
        self._blocked: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    @property
    def shape(self) -> tuple[int, int]:
        return self.codes.shape  # type: ignore[return-value]

    def blocked(self, tile: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(w, max(w, 0), min(w, 0)) laid out as (tiles, blocks, block, N) for `tile`."""
        if tile not in self._blocked:
            layout = _BlockLayout(self.shape[0], tile)
            w = layout.weights(self.exact)
            self._blocked[tile] = (w, np.maximum(w, 0), np.minimum(w, 0))
        return self._blocked[tile]


@dataclass(frozen=True)
class _BlockLayout:
    """The reduction split into adapter tiles, each tile into screening blocks (zero padded)."""

    k: int
    tile: int

    @property
    def tiles(self) -> int:
        return -(-self.k // self.tile)

    @property
    def block(self) -> int:
        return min(self.tile, _SCREEN_BLOCK)

    @property
    def blocks(self) -> int:
        return -(-self.tile // self.block)

    def weights(self, w: np.ndarray) -> np.ndarray:
        n = w.shape[1]
        w = _pad_axis(w, 0, self.tiles * self.tile).reshape(self.tiles, self.tile, n)
        return _pad_axis(w, 1, self.blocks * self.block).reshape(self.tiles, self.blocks, self.block, n)

    def activations(self, x: np.ndarray) -> np.ndarray:
        m = x.shape[0]
        x = _pad_axis(x, 1, self.tiles * self.tile).reshape(m, self.tiles, self.tile)
        x = _pad_axis(x, 2, self.blocks * self.block)
        return x.reshape(m, self.tiles, self.blocks, self.block).transpose(1, 2, 0, 3)


def _pad_axis(a: np.ndarray, axis: int, size: int) -> np.ndarray:
    """Zero-pad one axis to `size` (zeros add nothing to any running sum)."""
    if a.shape[axis] == size:
        return a
    pad = [(0, 0)] * a.ndim
    pad[axis] = (0, size - a.shape[axis])
    return np.pad(a, pad)


def matmul(x: np.ndarray, w: Int4Matrix, acc: Accumulator | None = None, tile: int | None = None,
           faults: MacFaults | None = None) -> np.ndarray:
    """x (M x K INT4 codes) @ w (K x N) through the accumulator; tile = adapter's reduction tile.

    Returns int64 M x N. Without an accumulator (the golden reference) the sum is exact.
    `faults` injects ripple-induced MAC errors (K MACs per output).
    """
    out = _matmul(x, w, acc, tile)
    return faults.corrupt(out, w.shape[0], acc) if faults is not None else out


def _matmul(x: np.ndarray, w: Int4Matrix, acc: Accumulator | None, tile: int | None) -> np.ndarray:
    x = np.asarray(x, dtype=np.int8)
    k = x.shape[1]
    if w.shape[0] != k:
        raise ValueError(f"matmul shapes {x.shape} and {w.shape} do not agree")
    xf = x.astype(w.dtype)
    if acc is None:
        return np.rint(xf @ w.exact).astype(np.int64)
    layout = _BlockLayout(k, k if tile is None or tile >= k else tile)
    if layout.tile * MAX_PRODUCT <= acc.hi:  # no partial sum can overflow: every rule is exact
        return np.rint(xf @ w.exact).astype(np.int64)
    xb = layout.activations(xf)
    wb, w_pos, w_neg = w.blocked(layout.tile)
    blocks = np.rint(xb @ wb)  # exact block sums: tiles x blocks x M x N
    partial = blocks.sum(axis=1).astype(np.int64)
    if acc.rule is OverflowRule.WRAP:
        partial = _wrap(partial, acc)
    elif acc.rule is OverflowRule.CLAMP_END:
        partial = np.clip(partial, acc.lo, acc.hi)
    else:
        # Inside a block the running sum stays between (sum before the block) + (the block's
        # negative products) and + (its positive products); only outputs whose bounds leave the
        # range are gathered and reduced step by step.
        rising = np.maximum(xb, 0) @ w_pos
        if x.min() < 0:
            rising += np.minimum(xb, 0) @ w_neg
        rising = np.rint(rising)
        before = np.cumsum(blocks, axis=1) - blocks
        unsafe = ((before + rising).max(axis=1) > acc.hi) | ((before + blocks - rising).min(axis=1) < acc.lo)
        for t, rows, cols in _by_tile(unsafe):
            start = t * layout.tile
            partial[t, rows, cols] = _saturate_gathered(x[:, start:start + layout.tile],
                                                        w.codes_t[:, start:start + layout.tile], rows, cols, acc)
    return partial.sum(axis=0)  # tile partials summed wide


def _by_tile(mask: np.ndarray) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    tiles, rows, cols = np.nonzero(mask)
    for t in np.unique(tiles):
        pick = tiles == t
        yield int(t), rows[pick], cols[pick]


def _saturate_gathered(x: np.ndarray, w_t: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                       acc: Accumulator) -> np.ndarray:
    out = np.empty(rows.size, dtype=np.int64)
    step = max(1, _GATHER_ELEMENTS // max(1, x.shape[1]))
    for start in range(0, rows.size, step):
        r, c = rows[start:start + step], cols[start:start + step]
        out[start:start + step] = reduce_rows(x[r].astype(np.int32) * w_t[c], acc)
    return out


# --- run-length vectors (the probe path) ----------------------------------------------------
@dataclass(frozen=True)
class RunVector:
    """An INT4 vector as runs: values[i] repeated counts[i] times."""

    values: np.ndarray
    counts: np.ndarray

    def __post_init__(self) -> None:
        if self.values.shape != self.counts.shape or self.values.ndim != 1:
            raise ValueError("run vector values and counts must be 1-D and the same length")
        if self.values.size and (self.values.min() < INT4_MIN or self.values.max() > INT4_MAX):
            raise ValueError("INT4 values must be in [-8, 7]")
        if self.counts.size and self.counts.min() < 1:
            raise ValueError("run counts must be >= 1")

    @property
    def length(self) -> int:
        return int(self.counts.sum())

    def dense(self) -> np.ndarray:
        return np.repeat(self.values, self.counts)


def product_runs(a: RunVector, b: RunVector, tile: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Element-wise products of two run vectors as runs: (products, counts, segment start)."""
    if a.length != b.length:
        raise ValueError(f"probe vectors differ in length ({a.length} vs {b.length})")
    ends_a, ends_b = np.cumsum(a.counts), np.cumsum(b.counts)
    cuts = [ends_a, ends_b]
    if tile:
        cuts.append(np.arange(tile, a.length, tile, dtype=np.int64))
    ends = np.unique(np.concatenate(cuts))
    starts = np.concatenate(([0], ends[:-1]))
    products = (a.values[np.searchsorted(ends_a, starts, side="right")].astype(np.int64)
                * b.values[np.searchsorted(ends_b, starts, side="right")])
    return products, ends - starts, starts


def dot_runs(a: RunVector, b: RunVector, acc: Accumulator | None, tile: int | None = None,
             faults: MacFaults | None = None) -> int:
    """One dot product through the accumulator (optionally tiled by an adapter, optionally with
    ripple-induced MAC errors)."""
    return faulted(_dot_runs(a, b, acc, tile), a.length, acc, faults)


def faulted(result: int, length: int, acc: Accumulator | None, faults: MacFaults | None) -> int:
    """A dot product of `length` MACs as the die returns it under `faults` (None: as computed)."""
    if faults is None:
        return result
    return int(faults.corrupt(np.array([result], dtype=np.int64), length, acc)[0])


def _dot_runs(a: RunVector, b: RunVector, acc: Accumulator | None, tile: int | None) -> int:
    products, counts, starts = product_runs(a, b, tile)
    if not tile or tile >= a.length:
        return int(reduce_rows(products[None], acc, counts[None])[0])
    # One row per tile, padded with zero-count segments (the identity for every rule).
    tile_of = starts // tile
    first = np.searchsorted(tile_of, np.arange(tile_of[-1] + 1))
    width = int(np.diff(np.append(first, tile_of.size)).max())
    slot = np.arange(tile_of.size) - first[tile_of]
    values = np.zeros((first.size, width), dtype=np.int64)
    runs = np.zeros_like(values)
    values[tile_of, slot], runs[tile_of, slot] = products, counts
    return int(reduce_rows(values, acc, runs).sum())


# --- ripple-induced MAC errors and dual compute (claim 10) ---------------------------------
RATE_AT_REFERENCE = 3e-8     # error probability per INT4 MAC at +-50 mV ripple
REFERENCE_RIPPLE_MV = 50.0
GAIN_AT_REFERENCE = 12.0     # +-50 mV gives 12x the rate just above the unit's onset
_ERROR_TOP_BIT = 22          # a late carry corrupts one of the register's upper bits (of at most 24)
_ERROR_BITS = 5              # ... one of the top five below the sign bit


def mac_error_rate(ripple_mv: float, onset_mv: float) -> float:
    """Per-MAC error probability at a ripple amplitude, for a unit whose timing margin ends at onset_mv.

    Zero up to the onset, then growing exponentially with the droop beyond it (timing-margin
    failures), from 1/12 of the +-50 mV rate just above the onset to that rate at +-50 mV.
    """
    if ripple_mv <= onset_mv:
        return 0.0
    span = max(REFERENCE_RIPPLE_MV - onset_mv, 1.0)
    return RATE_AT_REFERENCE / GAIN_AT_REFERENCE * GAIN_AT_REFERENCE ** ((ripple_mv - onset_mv) / span)


@dataclass
class MacFaults:
    """Random MAC errors at `rate` per MAC: each adds +-2^b to the output it lands in, b one of the
    accumulator's upper bits (timing failures hit the end of the carry chain). `injected` counts them."""

    rate: float
    rng: np.random.Generator
    injected: int = 0

    def corrupt(self, result: np.ndarray, macs_per_output: int, acc: Accumulator | None) -> np.ndarray:
        if self.rate <= 0.0 or macs_per_output <= 0:
            return result
        counts = self.rng.poisson(self.rate * macs_per_output, size=result.shape)
        total = int(counts.sum())
        if not total:
            return result
        self.injected += total
        hit = np.flatnonzero(counts)
        where = np.repeat(hit, counts.ravel()[hit])
        top = min(acc.bits if acc is not None else 32, _ERROR_TOP_BIT + 2) - 2
        bits = self.rng.integers(top - _ERROR_BITS + 1, top + 1, size=total)
        signs = self.rng.choice(np.array([-1, 1], dtype=np.int64), size=total)
        out = result.astype(np.int64, copy=True).ravel()
        np.add.at(out, where, signs * (np.int64(1) << bits.astype(np.int64)))
        return out.reshape(result.shape)


@dataclass
class Vote:
    """What dual compute found: outputs where the two copies disagreed (and were recomputed)."""

    mismatches: int = 0


MAX_VOTE_ROUNDS = 16


def voted(compute: Callable[[], np.ndarray], vote: Vote) -> np.ndarray:
    """Dual compute and vote: run `compute` twice, keep the outputs both copies agree on, and
    recompute the disagreeing ones (again twice) until each has an agreeing pair."""
    first, second = compute(), compute()
    result = np.array(first, copy=True)
    open_ = np.asarray(first != second)
    for _ in range(MAX_VOTE_ROUNDS):
        if not open_.any():
            return result
        vote.mismatches += int(open_.sum())
        again, check = compute(), compute()
        settled = open_ & (again == check)
        result = np.where(settled, again, result)
        open_ = open_ & ~settled
    raise RuntimeError(f"redundant compute did not converge in {MAX_VOTE_ROUNDS} rounds")
