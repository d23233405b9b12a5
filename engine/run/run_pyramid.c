/* The pyramid phase of an OME-Zarr output (SPEC §2 "OME-Zarr output"), which a run calls after
 * level 0 is written and flushed by every rank and before the completion marker. Level k+1
 * halves some axes of level k (run_ome.c says which; size ceil(n/2)); each of its values is made
 * from the block of level k it covers (2 voxels on a halved axis, 1 on the others, fewer at the
 * edge): `mean` sums their float32 values in float64 in C order of the block, divides by their
 * count and rounds once to the output type (round-half-to-even for integers); `nearest` takes the
 * block's first value in C order.
 * Invariant: a level-k+1 shard depends only on the level-k values it covers, read back from the
 * output through array/, so the bytes are the same for any ranks x threads; no rank holds more
 * than one slab of the parent region per thread. See docs/internals/pyramid.md. */
#include "run_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/par.h"

/* ---- the pyramid ---- */

struct pyr_thread {
    struct sm_scratch *scratch;
    struct sm_buf slab; /* parent values of one slab, the level's dtype */
    uint64_t read_ns, mean_ns;
};

struct pyramid {
    struct sm_array *parent; /* level k-1, read back */
    enum sm_dtype dt;
    size_t elem;
    unsigned nd;
    uint64_t pshape[3]; /* parent shape, padded to 3 axes (leading 1s) */
    uint64_t block[3];  /* the block per axis: 2 where the level halves the axis, else 1 */
    uint64_t step;      /* output planes per slab */
    bool nearest;       /* output.ome.method nearest */
    struct pyr_thread *ts;
};

/* The float32 value of element i of a span of dtype dt, as a double. */
static double load_f32(const uint8_t *p, enum sm_dtype dt)
{
    switch (dt) {
    case SM_DT_BOOL:
    case SM_DT_UINT8:
        return (double)(float)p[0];
    case SM_DT_INT8:
        return (double)(float)(int8_t)p[0];
    default:
        break;
    }
    union {
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
    } v;
    memcpy(&v, p, sm_dtype_size(dt));
    switch (dt) {
    case SM_DT_UINT16:
        return (double)(float)v.u16;
    case SM_DT_INT16:
        return (double)(float)v.i16;
    case SM_DT_UINT32:
        return (double)(float)v.u32;
    case SM_DT_INT32:
        return (double)(float)v.i32;
    case SM_DT_UINT64:
        return (double)(float)v.u64;
    case SM_DT_INT64:
        return (double)(float)v.i64;
    case SM_DT_FLOAT64:
        return (double)(float)v.f64;
    default:
        return (double)v.f32;
    }
}

/* Rounds the mean once to dt (round-half-to-even for integers: rint in the default mode). */
static void store_mean(uint8_t *p, enum sm_dtype dt, double m)
{
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
    } v;
    const double r = rint(m);
    switch (dt) {
    case SM_DT_BOOL:
    case SM_DT_UINT8:
        v.u8 = (uint8_t)r;
        break;
    case SM_DT_INT8:
        v.i8 = (int8_t)r;
        break;
    case SM_DT_UINT16:
        v.u16 = (uint16_t)r;
        break;
    case SM_DT_INT16:
        v.i16 = (int16_t)r;
        break;
    case SM_DT_UINT32:
        v.u32 = (uint32_t)r;
        break;
    case SM_DT_INT32:
        v.i32 = (int32_t)r;
        break;
    case SM_DT_UINT64:
        v.u64 = (uint64_t)r;
        break;
    case SM_DT_INT64:
        v.i64 = (int64_t)r;
        break;
    case SM_DT_FLOAT64:
        v.f64 = m;
        break;
    default:
        v.f32 = (float)m;
        break;
    }
    memcpy(p, &v, sm_dtype_size(dt));
}

/* The SPEC §2 mean of whole bz x by x bx blocks of a float32 or 8/16-bit unsigned row: n output
 * values from the parent rows at a (planes sy apart, rows sx apart), each block summed from 0 in
 * C order. Called with constant block sizes so each form compiles to straight-line sums. */
#define SM_MEAN_ROW(name, T, OUT)                                                                  \
    static inline void name(const T *a, uint64_t sy, uint64_t sx, uint64_t n, T *d, unsigned bz,   \
                            unsigned by, unsigned bx)                                              \
    {                                                                                              \
        const double cnt = (double)(bz * by * bx);                                                 \
        for (uint64_t x = 0; x < n; x++) {                                                         \
            const T *b = a + bx * x;                                                               \
            double t = 0.0;                                                                        \
            for (unsigned i = 0; i < bz; i++) {                                                    \
                for (unsigned j = 0; j < by; j++) {                                                \
                    for (unsigned k = 0; k < bx; k++) {                                            \
                        t += (double)b[i * sy + j * sx + k];                                       \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            d[x] = OUT(t / cnt);                                                                   \
        }                                                                                          \
    }
#define SM_TO_F32(m) ((float)(m))
#define SM_TO_U8(m) ((uint8_t)rint(m))
#define SM_TO_U16(m) ((uint16_t)rint(m))
SM_MEAN_ROW(mean_row_f32, float, SM_TO_F32)
SM_MEAN_ROW(mean_row_u8, uint8_t, SM_TO_U8)
SM_MEAN_ROW(mean_row_u16, uint16_t, SM_TO_U16)

/* Whole blocks of one output row by the row kernel of the type, with the block sizes the levels
 * use as constants (2x2x2, 1x2x2, 2x1x1 and every other mix through the general call). */
#define SM_MEAN_DISPATCH(fn, T)                                                                    \
    do {                                                                                           \
        const T *src_ = (const T *)(const void *)src;                                              \
        T *dst_ = (T *)(void *)dst;                                                                \
        if (bz == 2 && by == 2 && bx == 2) {                                                       \
            fn(src_, sy, sx, n, dst_, 2, 2, 2);                                                    \
        } else if (bz == 1 && by == 2 && bx == 2) {                                                \
            fn(src_, sy, sx, n, dst_, 1, 2, 2);                                                    \
        } else {                                                                                   \
            fn(src_, sy, sx, n, dst_, bz, by, bx);                                                 \
        }                                                                                          \
    } while (0)

/* n whole blocks of a row, for the types with a row kernel; false for the others. */
static bool mean_row_fast(enum sm_dtype dt, const uint8_t *src, uint64_t sy, uint64_t sx,
                          uint64_t n, uint8_t *dst, unsigned bz, unsigned by, unsigned bx)
{
    switch (dt) {
    case SM_DT_FLOAT32:
        SM_MEAN_DISPATCH(mean_row_f32, float);
        return true;
    case SM_DT_UINT8:
        SM_MEAN_DISPATCH(mean_row_u8, uint8_t);
        return true;
    case SM_DT_UINT16:
        SM_MEAN_DISPATCH(mean_row_u16, uint16_t);
        return true;
    default:
        return false;
    }
}

/* The mean of one clipped block [c0, c1) per axis, through the float32 value of each element. */
static void mean_block(const struct pyramid *py, const uint8_t *slab, const uint64_t *ps,
                       const uint64_t *c0, const uint64_t *c1, uint8_t *dst)
{
    const size_t e = py->elem;
    double s = 0.0;
    for (uint64_t a = c0[0]; a < c1[0]; a++) {
        for (uint64_t b = c0[1]; b < c1[1]; b++) {
            for (uint64_t c = c0[2]; c < c1[2]; c++) {
                s += load_f32(slab + ((a * ps[1] + b) * ps[2] + c) * e, py->dt);
            }
        }
    }
    const double cnt = (double)((c1[0] - c0[0]) * (c1[1] - c0[1]) * (c1[2] - c0[2]));
    store_mean(dst, py->dt, s / cnt);
}

/* Output planes [z0, z0 + nz) of a box of shape os (3 axes), from the parent slab of shape ps
 * whose first plane is the first block plane of output plane z0. */
static void reduce_slab(const struct pyramid *py, const uint8_t *slab, const uint64_t *ps,
                        const uint64_t *os, uint64_t z0, uint64_t nz, uint8_t *out)
{
    const size_t e = py->elem;
    const uint64_t *bk = py->block, sy = ps[1] * ps[2], sx = ps[2];
    for (uint64_t z = 0; z < nz; z++) {
        for (uint64_t y = 0; y < os[1]; y++) {
            uint64_t c0[3] = {bk[0] * z, bk[1] * y, 0}, c1[3];
            for (unsigned d = 0; d < 2; d++) {
                c1[d] = c0[d] + bk[d] <= ps[d] ? c0[d] + bk[d] : ps[d];
            }
            uint8_t *dst = out + (((z0 + z) * os[1] + y) * os[2]) * e;
            const uint8_t *row = slab + (c0[0] * sy + c0[1] * sx) * e;
            if (py->nearest) { /* the first value of each block in C order */
                for (uint64_t x = 0; x < os[2]; x++) {
                    memcpy(dst + x * e, row + bk[2] * x * e, e);
                }
                continue;
            }
            uint64_t x = 0;
            const uint64_t whole = ps[2] / bk[2] < os[2] ? ps[2] / bk[2] : os[2];
            if (c1[0] - c0[0] == bk[0] && c1[1] - c0[1] == bk[1] &&
                mean_row_fast(py->dt, row, sy, sx, whole, dst, (unsigned)bk[0], (unsigned)bk[1],
                              (unsigned)bk[2])) {
                x = whole;
            }
            for (; x < os[2]; x++) { /* edge blocks, and the types without a row kernel */
                c0[2] = bk[2] * x;
                c1[2] = c0[2] + bk[2] <= ps[2] ? c0[2] + bk[2] : ps[2];
                mean_block(py, slab, ps, c0, c1, dst + x * e);
            }
        }
    }
}

/* The write driver's fill callback: a level-k shard from the level-(k-1) values it covers. */
static sm_status fill_level(void *user, int thread, uint64_t shard, const uint64_t *offset,
                            const uint64_t *shape, void *data, size_t len, struct sm_err *err)
{
    (void)shard;
    struct pyramid *py = user;
    struct pyr_thread *ts = &py->ts[thread];
    const unsigned pad = 3 - py->nd;
    uint64_t oo[3] = {0, 0, 0}, os[3] = {1, 1, 1};
    for (unsigned d = 0; d < py->nd; d++) {
        oo[d + pad] = offset[d];
        os[d + pad] = shape[d];
    }
    if (len != os[0] * os[1] * os[2] * py->elem) {
        SM_FAIL(err, SM_E_INTERNAL, "level shard buffer of %zu bytes", len);
    }
    for (uint64_t z0 = 0; z0 < os[0]; z0 += py->step) {
        const uint64_t nz = os[0] - z0 < py->step ? os[0] - z0 : py->step;
        uint64_t po[3], ps[3];
        for (unsigned d = 0; d < 3; d++) {
            const uint64_t first = d == 0 ? oo[0] + z0 : oo[d];
            const uint64_t n = d == 0 ? nz : os[d];
            const uint64_t b = py->block[d];
            po[d] = b * first;
            const uint64_t end = b * (first + n) < py->pshape[d] ? b * (first + n) : py->pshape[d];
            ps[d] = end - po[d];
        }
        const size_t bytes = (size_t)(ps[0] * ps[1] * ps[2]) * py->elem;
        SM_TRY(sm_buf_reserve(&ts->slab, bytes, err));
        const uint64_t t0 = sm_clock_ns();
        SM_TRY(sm_array_read_region(py->parent, po + pad, ps + pad, ts->slab.ptr, bytes,
                                    ts->scratch, err));
        const uint64_t t1 = sm_clock_ns();
        reduce_slab(py, ts->slab.ptr, ps, os, z0, nz, data);
        ts->read_ns += t1 - t0;
        ts->mean_ns += sm_clock_ns() - t1;
    }
    return SM_OK;
}

/* Opens level k of the group writer's output for reading, from the writer's own document (no
 * metadata request). */
static sm_status open_level(const struct sm_run_pyramid *p, struct sm_store *store, unsigned k,
                            struct sm_array **out, struct sm_err *err)
{
    struct sm_array_opts o = SM_ARRAY_OPTS_DEFAULTS;
    o.limits.max_chunk_bytes = p->max_chunk_bytes;
    o.limits.max_object_bytes = UINT64_MAX / 4; /* our own shards: any size we wrote */
    struct sm_meta_docs docs = SM_META_DOCS_INIT;
    docs.kind = SM_META_DOCS_V3;
    char path[16];
    snprintf(path, sizeof(path), "%u", k);
    sm_status st = sm_buf_set(&docs.doc, sm_writer_zarr_json(sm_writer_level(p->writer, k)), err);
    if (st == SM_OK) {
        st = sm_array_open_docs(store, path, &o, &docs, out, err);
    }
    sm_meta_docs_free(&docs);
    return st;
}

/* Output planes per slab: the parent's inner chunk depth over the block depth (so a slab decodes
 * each inner chunk once), fewer while the slabs of every thread exceed half of the memory budget.
 */
static uint64_t slab_step(const struct sm_run_pyramid *p, const struct sm_writer *pw,
                          const struct sm_writer *lw, const uint64_t *block, int threads)
{
    const struct sm_array_meta *pm = sm_writer_meta(pw);
    const unsigned nd = pm->ndim, pad = 3 - nd;
    uint64_t obj[3] = {1, 1, 1}, off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    sm_writer_shard_box(lw, 0, off, shape); /* shard 0 is a full shard (or the whole level) */
    for (unsigned d = 0; d < nd; d++) {
        obj[d + pad] = shape[d];
    }
    uint64_t cz = 2;
    if (nd == 3) {
        cz = pm->inner_ndim > 0 ? pm->inner_chunk_shape[0] : pm->chunk_shape[0];
    }
    uint64_t step = cz / block[0] > 0 ? cz / block[0] : 1;
    step = step < obj[0] ? step : obj[0];
    const uint64_t per_plane =
        block[0] * block[1] * block[2] * obj[1] * obj[2] * sm_dtype_size(pm->dtype);
    while (step > 1 && per_plane * step * (uint64_t)threads > p->memory_bytes / 2) {
        step /= 2;
    }
    return step;
}

/* This rank's block of n shards. */
static void block_of(uint64_t n, uint64_t *first, uint64_t *count)
{
    const uint64_t r = (uint64_t)sm_par_rank(), R = (uint64_t)sm_par_size();
    *first = n * r / R;
    *count = n * (r + 1) / R - *first;
}

sm_status sm_run_pyramid(const struct sm_run_pyramid *p, struct sm_write_result *wr,
                         struct sm_err *err)
{
    const struct sm_writer *w = p->writer;
    const unsigned nlev = sm_writer_levels(w);
    const int threads = p->threads > 0 ? p->threads : sm_write_default_threads();
    struct pyramid py = {0};
    struct sm_store *store = NULL;
    sm_status st = SM_OK;
    py.ts = sm_calloc((size_t)threads, sizeof(*py.ts));
    if (py.ts == NULL) {
        st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot allocate %d threads", threads);
    }
    for (int i = 0; st == SM_OK && i < threads; i++) {
        st = sm_scratch_new(&py.ts[i].scratch, err);
    }
    if (st == SM_OK) {
        st = sm_store_file_open(sm_output_path(p->output), &store, err);
    }
    st = sm_par_agree(st, err);
    for (unsigned k = 1; st == SM_OK && k < nlev; k++) {
        const struct sm_writer *lw = sm_writer_level(w, k), *pw = sm_writer_level(w, k - 1);
        const struct sm_array_meta *pm = sm_writer_meta(pw), *lm = sm_writer_meta(lw);
        py.dt = pm->dtype;
        py.elem = sm_dtype_size(pm->dtype);
        py.nd = pm->ndim;
        py.nearest = p->method == SM_RUN_OME_NEAREST;
        for (unsigned d = 0; d < 3; d++) { /* an axis the level keeps has blocks of 1 */
            const unsigned a = d - (3 - py.nd);
            py.pshape[d] = d < 3 - py.nd ? 1 : pm->shape[a];
            py.block[d] = d >= 3 - py.nd && lm->shape[a] < pm->shape[a] ? 2 : 1;
        }
        py.step = slab_step(p, pw, lw, py.block, threads);
        st = open_level(p, store, k - 1, &py.parent, err);
        uint64_t first, count;
        block_of(sm_writer_nshards(lw), &first, &count);
        sm_run_progress_begin(&p->progress, "pyramid", "shards", sm_writer_nshards(lw));
        struct sm_write_result r = {0};
        if (st == SM_OK) {
            const struct sm_write_job job = {sm_writer_level_first(w, k) + first,
                                             count,
                                             NULL,
                                             threads,
                                             fill_level,
                                             &py,
                                             p->progress.update,
                                             p->progress.user,
                                             p->stop};
            st = sm_write_shards(w, p->output, &job, &r, err);
        }
        sm_run_progress_end(&p->progress, st == SM_OK);
        wr->written += r.written;
        wr->kept += r.kept;
        wr->bytes += r.bytes;
        wr->fill_ns += r.fill_ns;
        wr->encode_ns += r.encode_ns;
        wr->write_ns += r.write_ns;
        sm_array_close(py.parent);
        py.parent = NULL;
        /* every rank's level k is in place before any rank reads it for level k+1 */
        st = sm_par_agree(sm_run_stop_check(p->stop, st, err), err);
        if (st == SM_OK) {
            st = sm_par_agree(sm_output_flush(p->output, err), err);
        } else { /* a stop or a failure keeps the finished shards for resume */
            struct sm_err ignored;
            sm_err_clear(&ignored);
            (void)sm_output_flush(p->output, &ignored);
        }
    }
    for (int i = 0; py.ts != NULL && i < threads; i++) {
        sm_scratch_free(py.ts[i].scratch);
        sm_buf_free(&py.ts[i].slab);
    }
    sm_free(py.ts);
    sm_store_close(store);
    return st;
}
