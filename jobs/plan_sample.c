/* plan's sample of the data (plan_sample.h): the codec's ratio measured on a few output chunks
 * of the input, read, normalized and encoded exactly as the write phase would (split from
 * plan_estimate.c). */
#include "plan_sample.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include <shardmill/alloc.h>
#include <shardmill/meta.h>
#include <shardmill/pipeline.h>
#include <shardmill/stats.h>
#include <shardmill/store.h>
#include <shardmill/write.h>

uint64_t sm_plan_prod(const uint64_t *v, unsigned n)
{
    uint64_t p = 1;
    for (unsigned d = 0; d < n; d++) {
        p *= v[d];
    }
    return p;
}

/* The i-th of n sample boxes: output chunks on the chunk grid's diagonal, spread over the ROI. */
static void sample_box(const struct sm_output_spec *s, unsigned i, unsigned n, uint64_t *off,
                       uint64_t *shape)
{
    for (unsigned d = 0; d < s->ndim; d++) {
        const uint64_t g = (s->shape[d] + s->chunk[d] - 1) / s->chunk[d];
        uint64_t gi = (uint64_t)(((double)i + 0.5) * (double)g / (double)n);
        gi = gi < g ? gi : g - 1;
        off[d] = gi * s->chunk[d];
        shape[d] = s->shape[d] - off[d] < s->chunk[d] ? s->shape[d] - off[d] : s->chunk[d];
    }
}

/* Input read units (chunks, inner chunks, a source's slabs) a box touches. */
uint64_t sm_plan_units_of(const struct sm_array_meta *m, const uint64_t *off, const uint64_t *shape)
{
    const uint64_t *u = m->inner_ndim > 0 ? m->inner_chunk_shape : m->chunk_shape;
    uint64_t n = 1;
    for (unsigned d = 0; d < m->ndim; d++) {
        n *= (off[d] + shape[d] - 1) / u[d] - off[d] / u[d] + 1;
    }
    return n;
}

sm_status sm_plan_sample_read(const struct sm_plan_job *j, const struct sm_plan_input *in,
                              const struct sm_run_setup *su, const struct sm_output_spec *s0,
                              struct sm_plan_sample *sp, uint64_t *units, struct sm_err *err)
{
    const struct sm_array_meta *m = in->m;
    const size_t elem = sm_dtype_size(m->dtype);
    uint64_t g = 1;
    for (unsigned d = 0; d < s0->ndim; d++) {
        const uint64_t gd = (s0->shape[d] + s0->chunk[d] - 1) / s0->chunk[d];
        g = gd > g ? gd : g;
    }
    sp->n = g < SM_PLAN_SAMPLES ? (unsigned)g : SM_PLAN_SAMPLES;
    /* the boxes whose read units fit SM_PLAN_SAMPLE_UNITS together (the first ones of the
     * diagonal, spread as for sp->n boxes), never an unbounded number of reads */
    const unsigned want = sp->n;
    uint64_t need = 0;
    sp->units_first = 0;
    for (unsigned i = 0; i < want; i++) {
        uint64_t o[SM_MAX_DIMS], sh[SM_MAX_DIMS];
        sample_box(s0, i, want, o, sh);
        for (unsigned d = 0; d < m->ndim; d++) {
            o[d] += su->off[d];
        }
        const uint64_t n = sm_plan_units_of(m, o, sh);
        sp->units_first = i == 0 ? n : sp->units_first;
        if (need + n > SM_PLAN_SAMPLE_UNITS) {
            sp->n = i;
            break;
        }
        need += n;
    }
    struct sm_scratch *scratch = NULL;
    sm_status st = in->array != NULL ? sm_array_scratch_new(&scratch, err) : SM_OK;
    *units = 0;
    struct sm_store *store = in->array != NULL ? sm_array_store(in->array) : NULL;
    const uint64_t before = store != NULL ? atomic_load(&store->stats.bytes[SM_IO_PAYLOAD]) : 0;
    for (unsigned i = 0; st == SM_OK && i < sp->n; i++) {
        uint64_t off[SM_MAX_DIMS];
        sample_box(s0, i, want, sp->off[i], sp->shape[i]);
        for (unsigned d = 0; d < m->ndim; d++) {
            off[d] = su->off[d] + sp->off[i][d]; /* ROI -> input coordinates */
        }
        const size_t len = (size_t)sm_plan_prod(sp->shape[i], m->ndim) * elem;
        st = sm_buf_reserve(&sp->in[i], len, err);
        sp->in[i].len = len;
        *units += sm_plan_units_of(m, off, sp->shape[i]);
        if (st == SM_OK && in->src != NULL) {
            st = sm_source_plan(in->src, off, sp->shape[i], j->run.c.memory_bytes, err);
            if (st == SM_OK) {
                st = sm_source_read_box(in->src, 0, off, sp->shape[i], sp->in[i].ptr, err);
            }
        } else if (st == SM_OK) {
            st = sm_array_read_region(in->array, off, sp->shape[i], sp->in[i].ptr, len, scratch,
                                      err);
        }
    }
    sm_array_scratch_free(scratch);
    /* what the encoded-object cache would hold per decoded byte: the stored bytes the sample
     * fetched over the decoded bytes of the units it read (1 when nothing was counted) */
    const uint64_t got =
        store != NULL ? atomic_load(&store->stats.bytes[SM_IO_PAYLOAD]) - before : 0;
    const uint64_t *u = m->inner_ndim > 0 ? m->inner_chunk_shape : m->chunk_shape;
    const double decoded = (double)*units * (double)(sm_plan_prod(u, m->ndim) * elem);
    sp->in_ratio = got > 0 && decoded > 0 ? (double)got / decoded : 1.0;
    sp->in_ratio = sp->in_ratio < 1.0 ? sp->in_ratio : 1.0;
    return st;
}

/* The normalization the write phase would apply; a percentile window from the sample's own
 * histogram (the run's comes from the whole ROI). */
static sm_status sample_norm(const struct sm_plan_job *j, const struct sm_run_setup *su,
                             enum sm_dtype dt, const struct sm_plan_sample *sp, struct sm_norm *nm,
                             struct sm_err *err)
{
    memset(nm, 0, sizeof(*nm));
    nm->mode = j->run.normalize.mode == SM_NORM_SCALE ? SM_NORM_SCALE : SM_NORM_WINDOW;
    nm->divisor = j->run.normalize.divisor;
    nm->lo = j->run.normalize.lo;
    nm->hi = j->run.normalize.hi;
    if (sm_norm_desc(j->run.normalize.mode)->window != SM_NORM_WIN_PERCENTILE) {
        return SM_OK;
    }
    const size_t elem = sm_dtype_size(dt);
    double lo = su->params.lo, hi = su->params.hi;
    struct sm_hist h;
    if (su->range_from == SM_HIST_RANGE_MINMAX) {
        SM_TRY(sm_hist_init(&h, dt, 1, 0.0, 1.0, err));
        for (unsigned i = 0; i < sp->n; i++) {
            sm_hist_add_minmax(&h, sp->in[i].ptr, sp->in[i].len / elem);
        }
        const double mn = h.min, mx = h.max;
        sm_hist_destroy(&h);
        SM_TRY(sm_hist_minmax_range(mn, mx, &lo, &hi, err));
    }
    SM_TRY(sm_hist_init(&h, dt, su->params.bins, lo, hi, err));
    for (unsigned i = 0; i < sp->n; i++) {
        sm_hist_add(&h, sp->in[i].ptr, sp->in[i].len / elem);
    }
    sm_hist_finish(&h);
    nm->lo = sm_hist_percentile(&h, j->run.normalize.lo);
    nm->hi = sm_hist_percentile(&h, j->run.normalize.hi);
    if (!(nm->hi > nm->lo)) {
        nm->hi = nm->lo + 1.0; /* a flat sample: any window encodes the same constant */
    }
    sm_hist_destroy(&h);
    return SM_OK;
}

/* Encodes vals (n values of s->dtype, the box `shape`) as one shard of one inner chunk of the
 * spec s: its codec, level, fill and index. */
static sm_status encode_box(const struct sm_output_spec *s0, const uint64_t *shape,
                            const void *vals, size_t nbytes, struct sm_buf *enc,
                            struct sm_write_scratch *ws, struct sm_err *err)
{
    struct sm_output_spec s = *s0;
    memcpy(s.shape, shape, sizeof(s.shape));
    memcpy(s.shard, shape, sizeof(s.shard));
    memcpy(s.chunk, shape, sizeof(s.chunk));
    s.attributes = NULL;
    s.pending = NULL;
    struct sm_writer *w = NULL;
    sm_status st = sm_writer_new(&s, &w, err);
    if (st == SM_OK) {
        st = sm_writer_encode_shard(w, 0, (struct sm_bytes){vals, nbytes}, enc, ws, err);
    }
    sm_writer_free(w);
    return st;
}

static double value_at(enum sm_dtype dt, const void *v, uint64_t i)
{
    return dt == SM_DT_UINT8    ? (double)((const uint8_t *)v)[i]
           : dt == SM_DT_UINT16 ? (double)((const uint16_t *)v)[i]
                                : (double)((const float *)v)[i];
}

/* The box `shape` of output values reduced by the factors f as the pyramid reduces a level
 * (engine/run/run_ome.c: the mean of each block's voxels, rint for an integer type, or its first
 * voxel with `nearest`) into out, whose shape is ⌈shape/f⌉ (written to oshape). */
static void reduce_box(enum sm_dtype dt, bool nearest, unsigned nd, const uint64_t *shape,
                       const uint64_t *f, const void *in, uint64_t *oshape, void *out)
{
    uint64_t n = 1;
    for (unsigned d = 0; d < nd; d++) {
        oshape[d] = (shape[d] + f[d] - 1) / f[d];
        n *= oshape[d];
    }
    for (uint64_t o = 0; o < n; o++) {
        uint64_t oc[SM_MAX_DIMS], lo[SM_MAX_DIMS], hi[SM_MAX_DIMS], c[SM_MAX_DIMS];
        uint64_t rest = o;
        for (unsigned d = nd; d-- > 0;) {
            oc[d] = rest % oshape[d];
            rest /= oshape[d];
            lo[d] = c[d] = oc[d] * f[d];
            hi[d] = lo[d] + f[d] < shape[d] ? lo[d] + f[d] : shape[d];
        }
        double sum = 0, cnt = 0;
        for (;;) { /* the block's voxels, row-major */
            uint64_t i = 0;
            for (unsigned d = 0; d < nd; d++) {
                i = i * shape[d] + c[d];
            }
            sum += value_at(dt, in, i);
            cnt += 1;
            unsigned d = nd;
            while (!nearest && d-- > 0 && ++c[d] == hi[d]) {
                c[d] = lo[d];
            }
            if (nearest || d == UINT_MAX) {
                break;
            }
        }
        const double m = sum / cnt;
        if (dt == SM_DT_UINT8) {
            ((uint8_t *)out)[o] = (uint8_t)rint(m);
        } else if (dt == SM_DT_UINT16) {
            ((uint16_t *)out)[o] = (uint16_t)rint(m);
        } else {
            ((float *)out)[o] = (float)m;
        }
    }
}

/* Encodes each sample box as a shard of one inner chunk of the level 0 spec: its codec, level,
 * fill and index; with levels below (s1 not NULL), the box reduced to level 1 too. */
sm_status sm_plan_sample_encode(const struct sm_plan_job *j, const struct sm_run_setup *su,
                                enum sm_dtype in_dt, const struct sm_output_spec *s0,
                                const struct sm_output_spec *s1, const struct sm_plan_sample *sp,
                                struct sm_plan_estimate *e, struct sm_err *err)
{
    uint64_t f[SM_MAX_DIMS]; /* level 1's factors: ⌈shape0 / shape1⌉ */
    for (unsigned d = 0; s1 != NULL && d < s0->ndim; d++) {
        f[d] = (s0->shape[d] + s1->shape[d] - 1) / s1->shape[d];
    }
    const bool nearest =
        j->run.output.ome.levels != 0 && j->run.output.ome.method == SM_RUN_OME_NEAREST;
    struct sm_buf low = SM_BUF_INIT;
    struct sm_norm nm;
    SM_TRY(sample_norm(j, su, in_dt, sp, &nm, err));
    const size_t in_elem = sm_dtype_size(in_dt), out_elem = sm_dtype_size(s0->dtype);
    struct sm_write_scratch *ws = NULL;
    struct sm_buf vals = SM_BUF_INIT, enc = SM_BUF_INIT;
    sm_status st = sm_write_scratch_new(&ws, err);
    for (unsigned i = 0; st == SM_OK && i < sp->n; i++) {
        const size_t n = sp->in[i].len / in_elem;
        st = sm_buf_reserve(&vals, n * out_elem, err);
        if (st != SM_OK) {
            break;
        }
        if (j->run.normalize.mode == SM_NORM_NONE) {
            sm_cast_values(in_dt, sp->in[i].ptr, n, s0->dtype, vals.ptr);
        } else {
            sm_normalize_to(&nm, in_dt, sp->in[i].ptr, n, s0->dtype, vals.ptr);
        }
        st = encode_box(s0, sp->shape[i], vals.ptr, n * out_elem, &enc, ws, err);
        e->sample_raw += n * out_elem;
        e->sample_encoded += st == SM_OK ? enc.len : 0;
        if (st == SM_OK && s1 != NULL) {
            uint64_t oshape[SM_MAX_DIMS] = {0};
            st = sm_buf_reserve(&low, n * out_elem, err);
            if (st == SM_OK) {
                reduce_box(s0->dtype, nearest, s0->ndim, sp->shape[i], f, vals.ptr, oshape,
                           low.ptr);
                const size_t ln = (size_t)sm_plan_prod(oshape, s0->ndim) * out_elem;
                st = encode_box(s1, oshape, low.ptr, ln, &enc, ws, err);
                e->level_sample_raw += ln;
                e->level_sample_encoded += st == SM_OK ? enc.len : 0;
            }
        }
    }
    sm_buf_free(&low);
    sm_buf_free(&vals);
    sm_buf_free(&enc);
    sm_write_scratch_free(ws);
    return st;
}
