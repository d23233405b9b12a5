/* Intensity statistics on typed spans (SPEC §5): histograms, checksums, percentiles and the
 * float32 normalizations. Pure compute: no I/O, never sees encoded bytes. Histograms of 8- and
 * 16-bit data count raw values first and fold them into bins at the end (exact, branch-free);
 * other types bin each value with the SPEC §5 formula evaluated in double precision. */
#ifndef SM_STATS_STATS_H
#define SM_STATS_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/dtype.h"
#include "shardmill/status.h"

/* A histogram with `bins` bins over [lo, hi) plus underflow, overflow and NaN counts. Besides
 * the bins it keeps the finite minimum and maximum of the values counted (+inf and -inf while
 * there is none; a zero is always +0.0, so the result does not depend on the order) and the
 * +inf and -inf counts: those also sit in overflow and underflow (they are >= hi and < lo of
 * every finite range), so a percentile's N still counts every non-NaN value. */
struct sm_hist {
    enum sm_dtype dtype;
    uint32_t bins;
    double lo, hi;
    uint64_t *counts; /* bins entries (owned) */
    uint64_t underflow, overflow, nan;
    uint64_t inf_pos, inf_neg; /* part of overflow and underflow */
    double min, max;           /* finite values only; min > max: none */
    uint64_t *raw; /* 8/16-bit types: one counter per possible value, folded by sm_hist_finish */
    size_t nraw;
};

/* The SPEC §5 default for a type: uint8 -> 256 bins over [0, 256); int8, int16, uint16 -> one bin
 * per value over the whole type range. False for wider integers and floats: they have no exact
 * default, their range comes from the min/max pass (sm_hist_minmax_range). */
bool sm_hist_default(enum sm_dtype dt, uint32_t *bins, double *lo, double *hi);

/* The bins of the min/max pass when histogram.bins is not given (SPEC §5). */
#define SM_HIST_MINMAX_BINS 65536u

/* The range of the min/max pass (SPEC §5) from the finite min and max of the whole ROI:
 * [min, nextafter(max, +inf)) in double, so max falls in the last bin (bin = floor((v - lo) * B /
 * (hi - lo)), clamped to B - 1 where rounding reaches B). min == max gives [min, nextafter(min)):
 * every finite value in bin 0. No finite value (min > max: empty, all NaN or +-inf) gives [0, 1).
 * Values of 64-bit integer types are binned as doubles (exact up to 2^53 in magnitude, rounded to
 * the nearest double beyond). SM_E_DATA naming `histogram.range` when hi or hi - lo is not finite
 * (float64 values near +-DBL_MAX): such data needs an explicit range. */
sm_status sm_hist_minmax_range(double min, double max, double *lo, double *hi, struct sm_err *err);

/* Prepares an empty histogram. SM_E_USAGE unless bins >= 1 and lo < hi (both finite). */
sm_status sm_hist_init(struct sm_hist *h, enum sm_dtype dt, uint32_t bins, double lo, double hi,
                       struct sm_err *err);
void sm_hist_destroy(struct sm_hist *h);

/* Counts n values (native little-endian elements of h->dtype). Not thread-safe: one histogram
 * per thread, merged in a fixed order. */
void sm_hist_add(struct sm_hist *h, const void *values, size_t n);

/* Only the finite min and max of n values (the min/max pass): no bins, no other counts. */
void sm_hist_add_minmax(struct sm_hist *h, const void *values, size_t n);

/* Adds src into dst (same dtype, bins and range). Raw counters merge too; min and max combine. */
void sm_hist_merge(struct sm_hist *dst, const struct sm_hist *src);

/* Folds raw value counters into bins and min/max (idempotent). Call before reading counts. */
void sm_hist_finish(struct sm_hist *h);

/* Number of non-NaN values counted (underflow and overflow included). */
uint64_t sm_hist_total(const struct sm_hist *h);

/* Lower edge of bin i: lo + i * (hi - lo) / bins. */
double sm_hist_edge(const struct sm_hist *h, uint32_t i);

/* SPEC §5 percentile p in [0, 100] of a finished histogram: the lower edge of the first bin at
 * which the cumulative count (underflow first) reaches ceil(p/100 * N); `lo` if that happens in
 * the underflow, `hi` in the overflow. Returns lo for an empty histogram. */
double sm_hist_percentile(const struct sm_hist *h, double p);

/* SPEC §5 checksums: sum of values (signed 64-bit, wrapping) and sum of value * (1 + i) mod 2^64
 * where i is the linear C-order index in the whole array. Floats contribute their IEEE bit
 * pattern read as an unsigned integer. */
struct sm_checksums {
    uint64_t sum; /* reinterpret as int64_t for the report */
    uint64_t weighted;
};

/* Adds a run of n consecutive elements whose first has linear index `first_index`. */
void sm_checksums_add_run(struct sm_checksums *c, enum sm_dtype dt, const void *values, size_t n,
                          uint64_t first_index);

/* Adds a C-order box of values: the box [off, off + shape) of an array whose C-order element
 * strides are `stride` (ndim values), so every row gets its linear index in the whole array.
 * `values` holds the box densely (product(shape) elements). ndim 0 adds one element at index 0. */
void sm_checksums_add_box(struct sm_checksums *c, enum sm_dtype dt, const void *values,
                          unsigned ndim, const uint64_t *stride, const uint64_t *off,
                          const uint64_t *shape);

/* The normalization modes (SPEC §5, `normalize.mode`; one enum for the configuration, the run
 * and the kernel, in the order of the key's choices): scale divides by a divisor; window maps
 * [lo, hi] to [0, 1]; percentile takes lo and hi (0..100) as percentiles of the global histogram
 * and becomes that window; none keeps the input's values and type (SPEC §2: rechunk / re-encode;
 * output.dtype may widen them). */
enum sm_norm_mode { SM_NORM_SCALE, SM_NORM_WINDOW, SM_NORM_PERCENTILE, SM_NORM_NONE };
/* Its name in the configuration, zarr.json and the report (sm_norm_modes[m].name). */
const char *sm_norm_mode_name(enum sm_norm_mode m);

/* The registry of normalization modes (docs/CONTRIBUTING.md "A new normalization mode"): one
 * descriptor per mode, indexed by its enum value, read by the run, by jobs/' schema, rules, help,
 * docs/CONFIG.md and plan alike, so that no list of modes is written anywhere else. */
enum sm_norm_window {
    SM_NORM_WIN_DIVISOR,    /* [0, divisor] maps to [0, 1]: normalize.divisor */
    SM_NORM_WIN_VALUES,     /* [lo, hi] given as values: normalize.lo, normalize.hi */
    SM_NORM_WIN_PERCENTILE, /* lo and hi are percentiles (0..100) of the global histogram */
    SM_NORM_WIN_NONE        /* no window: the values are kept (a lossless cast) */
};
enum sm_norm_omero {
    SM_NORM_OMERO_WINDOW, /* the OME-Zarr omero window is the normalization's output range */
    SM_NORM_OMERO_INPUT   /* the input's own values: the p1..p99 of their histogram */
};
struct sm_norm_desc {
    const char *name;      /* normalize.mode's YAML choice */
    bool needs_statistics; /* the window needs the global histogram first: two passes */
    const char *keys;      /* the normalize.* keys it reads, "|"-separated ("" for none) */
    enum sm_norm_window window;
    enum sm_norm_omero omero;
    const char *doc; /* one line for docs/CONFIG.md and the key's help */
};
#define SM_NORM_NMODES 4
extern const struct sm_norm_desc sm_norm_modes[SM_NORM_NMODES];
/* sm_norm_modes[m]; a mode out of range is treated as a window (as the kernel treats it). */
const struct sm_norm_desc *sm_norm_desc(enum sm_norm_mode m);

/* Normalization (SPEC §5), computed in float32 exactly as written. The kernel's mode is
 * SM_NORM_SCALE or SM_NORM_WINDOW (a percentile is resolved to its window first; none is no
 * normalization); any other mode is treated as a window. */
struct sm_norm {
    enum sm_norm_mode mode;
    double divisor; /* scale */
    double lo, hi;  /* window (percentile resolves to a window) */
};

/* Writes n float32 outputs for n input values of dtype dt. */
void sm_normalize(const struct sm_norm *nm, enum sm_dtype dt, const void *values, size_t n,
                  float *out);
/* The types a normalization writes (SPEC §2 `output.dtype`): float32, uint8, uint16. */
bool sm_normalize_output_ok(enum sm_dtype out_dt);
/* Writes n outputs of type out_dt (sm_normalize_output_ok) in one pass: float32 as above; uint8
 * and uint16 as rint(w * MAX) in float32, half to even, clamped to [0, MAX], NaN -> 0, where w
 * is the float32 value (stats_normalize.c). Any other out_dt writes nothing. */
void sm_normalize_to(const struct sm_norm *nm, enum sm_dtype dt, const void *values, size_t n,
                     enum sm_dtype out_dt, void *out);

/* A normalization prepared once per run (SPEC §5, stats_normalize.c): for an input of at most 16
 * bits (bool, int8, uint8, int16, uint16) a lookup table with the output of every possible value
 * (256 or 65,536 entries of out_dt, at most 256 KiB), filled by sm_normalize_to itself, so the
 * table gives sm_normalize_to's outputs bit for bit and a value costs one load. Other input types
 * (and an out_dt no normalization writes) keep no table: sm_norm_lut_apply computes the formula. */
struct sm_norm_lut {
    struct sm_norm norm;
    enum sm_dtype in_dt, out_dt;
    size_t entries; /* 256 or 65536; 0: no table, the formula */
    void *table;    /* entries outputs of out_dt, indexed by the input value's bits (owned) */
};
/* True if sm_norm_lut_init builds a table for this input and output type. */
bool sm_norm_lut_fits(enum sm_dtype in_dt, enum sm_dtype out_dt);
/* Prepares nm from in_dt to out_dt (sm_normalize_output_ok), with its table when
 * sm_norm_lut_fits. SM_E_NOMEM (the table). sm_norm_lut_destroy frees it. */
sm_status sm_norm_lut_init(struct sm_norm_lut *lut, const struct sm_norm *nm, enum sm_dtype in_dt,
                           enum sm_dtype out_dt, struct sm_err *err);
void sm_norm_lut_destroy(struct sm_norm_lut *lut);
/* sm_normalize_to(&lut->norm, lut->in_dt, values, n, lut->out_dt, out), through the table when
 * there is one. */
void sm_norm_lut_apply(const struct sm_norm_lut *lut, const void *values, size_t n, void *out);

/* SPEC §2 `normalize.mode: none` (stats_cast.c): true if every value of `from` is exactly a value
 * of `to` (the same type, a wider integer, a float with enough significand bits). */
bool sm_cast_lossless(enum sm_dtype from, enum sm_dtype to);
/* Writes n values of `in` (type from) as type `to` (a lossless cast: sm_cast_lossless). */
void sm_cast_values(enum sm_dtype from, const void *in, size_t n, enum sm_dtype to, void *out);

/* The pyramid's block reduction (SPEC §5.9, stats_pyramid.c): one OME-Zarr level from the level
 * above it. */
struct sm_level_reduce {
    enum sm_dtype dtype;
    uint64_t block[3]; /* per axis (2-D padded to z = 1): 2 where the level halves it, else 1 */
    bool nearest;      /* the block's first value in C order instead of the mean */
};
/* Output planes [z0, z0 + nz) of a level box of shape os (3 axes, C order) into out, from the
 * parent values `parent`, a box of shape ps (3 axes) whose first plane is the first block plane
 * of output plane z0; blocks reaching past ps are clipped to it. */
void sm_level_reduce(const struct sm_level_reduce *r, const void *parent, const uint64_t *ps,
                     const uint64_t *os, uint64_t z0, uint64_t nz, void *out);

#endif
