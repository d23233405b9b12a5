"""The NumPy oracle of SPEC §5 for the convert tier and the benchmarks: the default histogram,
histogram and percentiles, the float32 normalizations, the pyramid's block mean, the 64-bit
checksums of a region, and bit-exact comparison with a readable first difference."""

import math
from fractions import Fraction

import numpy as np

U64 = 2**64


# ---- NumPy oracle of SPEC §5 ----

def default_hist(dtype):
    """(bins, lo, hi) of SPEC §5's defaults."""
    dt = np.dtype(dtype)
    if dt == np.uint8:
        return 256, 0, 256
    if dt in (np.int8, np.int16, np.uint16):
        info = np.iinfo(dt)
        return int(info.max) - int(info.min) + 1, int(info.min), int(info.max) + 1
    raise ValueError(f"{dt}: the histogram needs an explicit range (SPEC §5)")


def histogram(values, bins, lo, hi):
    """counts, underflow, overflow, nan of SPEC §5 (exact integer bin arithmetic for integer
    inputs and integer ranges: bin = floor((v - lo) * B / (hi - lo)))."""
    v = np.asarray(values).ravel()
    assert v.dtype.kind in "iu", "the convert tier uses integer inputs"
    v = v.astype(np.int64)
    lo_f, hi_f = Fraction(lo), Fraction(hi)
    if lo_f.denominator == 1 and hi_f.denominator == 1 and -2**62 <= lo_f < hi_f <= 2**62:
        # integer bounds: NumPy int64 comparisons (a Fraction operand makes NumPy compare
        # element by element in Python: ~10 s for the 7 M voxels of the head CT)
        lo_i, hi_i = int(lo_f), int(hi_f)
        under = int(np.count_nonzero(v < lo_i))
        over = int(np.count_nonzero(v >= hi_i))
        inside = v if under == 0 and over == 0 else v[(v >= lo_i) & (v < hi_i)]
        # one bin per value (the int16/uint16 defaults): floor((v - lo) * B / B) = v - lo
        b = inside - lo_i if bins == hi_i - lo_i else ((inside - lo_i) * bins) // (hi_i - lo_i)
    else:  # exact rationals (slow path, small arrays only)
        under = int(np.count_nonzero(v < lo_f))
        over = int(np.count_nonzero(v >= hi_f))
        inside = v[(v >= lo_f) & (v < hi_f)]
        b = np.array([int((Fraction(int(x)) - lo_f) * bins // (hi_f - lo_f)) for x in inside],
                     dtype=np.int64)
    counts = np.bincount(b, minlength=bins).astype(np.int64)
    assert counts.size == bins
    return counts, under, over, 0


def bin_edge(lo, hi, bins, i):
    return Fraction(lo) + Fraction(i) * (Fraction(hi) - Fraction(lo)) / bins


def percentile(counts, under, over, lo, hi, p):
    """SPEC §5: counting from the underflow through the bins to the overflow, the lower edge of
    the first bin at which the cumulative count reaches ceil(p/100 * N) (exact arithmetic on the
    decimal p); landing in the underflow gives lo of the range, in the overflow hi."""
    n = int(under + int(np.sum(counts)) + over)
    target = math.ceil(Fraction(str(p)) * n / 100)
    if under >= target:
        return Fraction(lo)
    cum = np.cumsum(counts) + under
    hit = np.nonzero(cum >= target)[0]
    if hit.size == 0:
        return Fraction(hi)
    return bin_edge(lo, hi, len(counts), int(hit[0]))


def normalize(values, mode, divisor=None, lo=None, hi=None):
    """SPEC §5 in float32, exactly as written (NumPy float32 arithmetic)."""
    x = np.asarray(values).astype(np.float32)
    if mode == "scale":
        return (x / np.float32(divisor)).astype(np.float32)
    lo32, hi32 = np.float32(float(lo)), np.float32(float(hi))
    with np.errstate(all="ignore"):
        y = (x - lo32) / (hi32 - lo32)
    return np.clip(y, np.float32(0), np.float32(1)).astype(np.float32)


def percentile_window(values, lo_pct, hi_pct):
    """SPEC §5 percentile normalization of values over the default histogram of their type: the
    window [p_lo, p_hi] from the histogram's percentiles, applied as float64 (normalize)."""
    bins, lo, hi = default_hist(values.dtype)
    counts, under, over, _ = histogram(values, bins, lo, hi)
    p_lo = percentile(counts, under, over, lo, hi, lo_pct)
    p_hi = percentile(counts, under, over, lo, hi, hi_pct)
    return normalize(values, "window", lo=p_lo, hi=p_hi)


def block_mean(a, block):
    """SPEC §2's mean of one pyramid level: per block of the level above (block[d] voxels on axis
    d: 2 where the level halves it, 1 elsewhere; fewer at the edges) the float32 values summed in
    float64 from 0 in the block's C order, divided by their count, rounded once to a's type
    (float32; rint, half to even, for integers)."""
    shp = tuple(-(-n // b) for n, b in zip(a.shape, block))
    s = np.zeros(shp, np.float64)
    cnt = np.zeros(shp, np.float64)
    for off in np.ndindex(*block):  # C order of the block
        sub = a[tuple(slice(o, None, b) for o, b in zip(off, block))]
        sub = sub.astype(np.float32).astype(np.float64)
        s[tuple(slice(0, n) for n in sub.shape)] += sub
        cnt[tuple(slice(0, n) for n in sub.shape)] += 1
    m = s / cnt
    return m.astype(a.dtype) if a.dtype.kind == "f" else np.rint(m).astype(a.dtype)


def as_u64_bits(values):
    """v of SPEC §5 as uint64: integers sign-extended to 64 bits, floats by their bit pattern."""
    v = np.asarray(values)
    if v.dtype.kind == "f":
        bits = v.view(np.uint32 if v.dtype.itemsize == 4 else np.uint64)
        return bits.astype(np.uint64)
    if v.dtype.kind == "b":
        return v.astype(np.uint64)
    return v.astype(np.int64).view(np.uint64)


def linear_index(full_shape, offset, shape):
    """C-order linear index in an array of full_shape of every voxel of [offset, offset+shape)."""
    idx = np.zeros(tuple(shape), dtype=np.uint64)
    stride = 1
    for d in reversed(range(len(full_shape))):
        ax = (np.arange(shape[d], dtype=np.uint64) + np.uint64(offset[d])) * np.uint64(stride)
        idx += ax.reshape([-1 if k == d else 1 for k in range(len(full_shape))])
        stride *= full_shape[d]
    return idx


def checksums(values, full_shape, offset):
    """(checksum as signed int64, weighted_checksum as uint64) of SPEC §5."""
    values = np.asarray(values)
    s = w = 0
    step = max(1, (1 << 22) // max(1, int(np.prod(values.shape[1:]))))  # bounded memory
    for z in range(0, values.shape[0], step):
        part = values[z:z + step]
        v = as_u64_bits(part)
        off = [offset[0] + z] + list(offset[1:])
        idx = linear_index(full_shape, off, part.shape)
        with np.errstate(over="ignore"):
            s += int(np.sum(v, dtype=np.uint64))
            w += int(np.sum(v * (idx + np.uint64(1)), dtype=np.uint64))
    s %= U64
    w %= U64
    return (s - U64 if s >= 2**63 else s), w


def same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype.itemsize == b.dtype.itemsize and \
        a.tobytes() == b.tobytes()


def first_diff(got, want):
    g = np.ascontiguousarray(got).view(np.uint8).reshape(-1, got.dtype.itemsize)
    w = np.ascontiguousarray(want).view(np.uint8).reshape(-1, want.dtype.itemsize)
    if g.shape != w.shape:
        return f"shape {got.shape} vs {want.shape}"
    bad = np.nonzero(np.any(g != w, axis=1))[0]
    if bad.size == 0:
        return "identical"
    i = int(bad[0])
    at = np.unravel_index(i, got.shape)
    return (f"{bad.size} of {got.size} values differ; first at {tuple(int(x) for x in at)}: "
            f"got {got.ravel()[i]!r} want {want.ravel()[i]!r}")
