/* What zarr.json says of a convert (SPEC §2 provenance, §5 normalization), the output's type,
 * and the keep-or-re-read rule of SPEC §1 (run_convert.c runs the phases). */
#include "run_convert_int.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/sm_version.h"

json_t *sm_run_norm_json(const struct sm_run_norm *cfg, const struct sm_norm *nm)
{
    json_t *o = json_pack("{s:s}", "mode", sm_norm_mode_name(cfg->mode));
    if (cfg->mode == SM_NORM_NONE) { /* the values are kept: no window */
        json_object_set_new(o, "lo", json_null());
        json_object_set_new(o, "hi", json_null());
        return o;
    }
    /* scale is reported as the window it equals before clamping: out = (v - 0) / (divisor - 0) */
    json_object_set_new(o, "lo", json_real(nm->mode == SM_NORM_SCALE ? 0.0 : nm->lo));
    json_object_set_new(o, "hi", json_real(nm->mode == SM_NORM_SCALE ? nm->divisor : nm->hi));
    if (nm->mode == SM_NORM_SCALE) {
        json_object_set_new(o, "divisor", json_real(nm->divisor));
    }
    if (cfg->mode == SM_NORM_PERCENTILE) {
        json_object_set_new(o, "percentiles", json_pack("[f,f]", cfg->lo, cfg->hi));
    }
    return o;
}

json_t *sm_cv_identity(const struct cv *cv)
{
    const struct sm_convert_run *p = cv->p;
    char hex[65];
    if (p->config_sha256 == NULL) {
        sm_sha256_hex("", 0, hex);
    } else {
        snprintf(hex, sizeof(hex), "%s", p->config_sha256);
    }
    json_t *pv = json_object();
    json_object_set_new(
        pv, "engine",
        json_pack("{s:s,s:s}", "version", SM_VERSION_STRING, "commit", SM_GIT_COMMIT));
    json_object_set_new(pv, "config_sha256", json_string(hex));
    /* the input by what a user cannot set back (run_input_id.c, SPEC §6.5): a resume or auto
     * whose input changed is refused naming it; its values are bound shard by shard through the
     * records' digests as well */
    json_object_set_new(
        pv, "input", cv->input_id != NULL ? sm_run_input_part(cv->input_id, false) : json_object());
    json_object_set_new(pv, "input_state",
                        cv->input_id != NULL ? sm_run_input_part(cv->input_id, true)
                                             : json_object());
    return pv;
}

json_t *sm_cv_provenance(const struct cv *cv, const struct sm_scan_result *r)
{
    const struct sm_convert_run *p = cv->p;
    const struct sm_run_setup *su = &cv->su;
    const struct sm_norm *nm = &cv->res->norm;
    const unsigned nd = cv->m->ndim;
    /* r NULL: the statistics are pending (one pass: sm_output_restate adds them) */
    json_t *hist =
        r == NULL ? NULL
                  : json_pack("{s:i,s:[f,f],s:o,s:o,s:o,s:o,s:o,s:o}", "bins", (int)r->hist.bins,
                              "range", r->hist.lo, r->hist.hi, "voxels", sm_json_u64(r->voxels),
                              "underflow", sm_json_u64(r->hist.underflow), "overflow",
                              sm_json_u64(r->hist.overflow), "nan", sm_json_u64(r->hist.nan),
                              "checksum", sm_json_checksum_i64((int64_t)r->sums.sum),
                              "weighted_checksum", sm_json_checksum_u64(r->sums.weighted));
    json_t *pv = sm_cv_identity(cv); /* engine, config_sha256, input first: the job's identity */
    json_object_set_new(pv, "roi",
                        json_pack("{s:o,s:o}", "offset", sm_json_u64_array(su->off, nd), "shape",
                                  sm_json_u64_array(su->shape, nd)));
    json_object_set_new(pv, "normalization", sm_run_norm_json(&p->normalize, nm));
    /* the type the values are written as (SPEC §2: uint8/uint16 are rint(w × MAX)) */
    json_object_set_new(pv, "output_dtype", json_string(sm_dtype_name(cv->out_dt)));
    if (hist != NULL && cv->res->no_histogram) {
        /* the placeholder counts (run_convert.c no_histogram) are no histogram of the values;
         * the checksums are, so they stay */
        json_object_set_new(hist, "bins", json_null());
        json_object_set_new(hist, "range", json_null());
        json_object_del(hist, "underflow");
        json_object_del(hist, "overflow");
        json_object_del(hist, "nan");
    }
    if (hist != NULL) {
        json_object_set_new(pv, "histogram", hist);
    }
    return json_pack("{s:o}", "shardmill", pv);
}

sm_status sm_cv_make_norm(const struct sm_run_norm *cfg, const struct sm_hist *h,
                          struct sm_norm *nm, struct sm_err *err)
{
    memset(nm, 0, sizeof(*nm));
    switch (cfg->mode) {
    case SM_NORM_NONE: /* unused: the values are cast, not normalized */
    case SM_NORM_SCALE:
        nm->mode = SM_NORM_SCALE;
        nm->divisor = cfg->divisor;
        return SM_OK;
    case SM_NORM_WINDOW:
        nm->mode = SM_NORM_WINDOW;
        nm->lo = cfg->lo;
        nm->hi = cfg->hi;
        return SM_OK;
    case SM_NORM_PERCENTILE:
        nm->mode = SM_NORM_WINDOW;
        nm->lo = sm_hist_percentile(h, cfg->lo);
        nm->hi = sm_hist_percentile(h, cfg->hi);
        if (!(nm->hi > nm->lo)) {
            SM_FAIL_AT(err, SM_E_DATA, "normalize",
                       "percentiles %g and %g give an empty window [%g, %g] for this data", cfg->lo,
                       cfg->hi, nm->lo, nm->hi);
        }
        return SM_OK;
    }
    return SM_OK;
}

/* SPEC §1: a rank keeps its decoded input for the write phase when it fits half of memory_bytes.
 * It can when its run of tiles fills a box (one rank: the ROI; several: e.g. whole tile rows or
 * slabs) that holds the input of every shard of its run; then the scan copies each tile into that
 * box (su->params.keep) and the shards are filled from it. Returns the buffer (NULL: re-read
 * through the cache) and its size in *bytes. */
uint8_t *sm_cv_keep_plan(uint64_t memory_bytes, const struct sm_array_meta *m,
                         struct sm_run_setup *su, const struct sm_part *tiles,
                         const struct sm_tiling *grid, const struct sm_part *shards, size_t *bytes)
{
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS], soff[SM_MAX_DIMS], sshape[SM_MAX_DIMS];
    if (!sm_tiling_run_box(&su->tiling, tiles->first, tiles->count, off, shape)) {
        return NULL;
    }
    if (shards->count > 0) {
        sm_tiling_run_box(grid, shards->first, shards->count, soff, sshape); /* bounding box */
        for (unsigned d = 0; d < m->ndim; d++) {
            if (soff[d] < off[d] || soff[d] + sshape[d] > off[d] + shape[d]) {
                return NULL; /* some of its shards need input another rank scanned */
            }
        }
    }
    size_t n = sm_dtype_size(m->dtype);
    for (unsigned d = 0; d < m->ndim; d++) {
        n *= (size_t)shape[d];
    }
    if (n > memory_bytes / 2 - run_memo_total(memory_bytes)) {
        return NULL;
    }
    uint8_t *keep = sm_malloc(n == 0 ? 1 : n); /* NULL (re-read) if it cannot be had */
    if (keep != NULL) {
        su->params.keep = keep;
        memcpy(su->params.keep_offset, off, sizeof(off));
        memcpy(su->params.keep_shape, shape, sizeof(shape));
        *bytes = n;
    }
    return keep;
}

/* The output's type (SPEC §2): a normalization writes float32 (default), uint8 or uint16
 * (sm_normalize_to); normalize none the input's type or output.dtype when that holds every input
 * value. */
sm_status sm_cv_output_dtype(const struct sm_run_norm *nm, const struct sm_run_output *o,
                             enum sm_dtype in, enum sm_dtype *out, struct sm_err *err)
{
    if (nm->mode != SM_NORM_NONE) {
        *out = o->dtype_set ? o->dtype : SM_DT_FLOAT32;
        if (!sm_normalize_output_ok(*out)) {
            SM_FAIL_AT(err, SM_E_USAGE, "output.dtype",
                       "a normalized output is float32, uint8 or uint16, not %s (other types "
                       "need normalize.mode: none)",
                       sm_dtype_name(*out));
        }
        return SM_OK;
    }
    *out = o->dtype_set ? o->dtype : in;
    if (!sm_cast_lossless(in, *out)) {
        SM_FAIL_AT(err, SM_E_USAGE, "output.dtype",
                   "%s -> %s is a narrowing cast (not every %s value is a %s value); normalize "
                   "none keeps values: use the input's type or a wider one",
                   sm_dtype_name(in), sm_dtype_name(*out), sm_dtype_name(in), sm_dtype_name(*out));
    }
    return SM_OK;
}

static json_t *doubles_json(const double *v, unsigned n)
{
    json_t *a = json_array();
    for (unsigned i = 0; i < n; i++) {
        json_array_append_new(a, json_real(v[i]));
    }
    return a;
}

json_t *sm_cv_source_geometry(const struct sm_source_info *info)
{
    if (!info->spacing_set && !info->origin_set) {
        return NULL;
    }
    json_t *pv = json_object();
    if (info->spacing_set) {
        json_object_set_new(pv, "spacing", doubles_json(info->spacing, info->ndim));
        if (info->unit != NULL) {
            json_object_set_new(pv, "unit", json_string(info->unit));
        }
    }
    if (info->origin_set) {
        json_object_set_new(pv, "origin", doubles_json(info->origin, info->ndim));
    }
    return json_pack("{s:o}", "shardmill", pv);
}

/* The smallest and largest value of a type (floats: the largest finite ones). */
static void type_range(enum sm_dtype dt, double *lo, double *hi)
{
    const unsigned bits = 8u * (unsigned)sm_dtype_size(dt);
    if (dt == SM_DT_FLOAT32 || dt == SM_DT_FLOAT64) {
        *hi = dt == SM_DT_FLOAT32 ? FLT_MAX : DBL_MAX;
        *lo = -*hi;
    } else if (dt == SM_DT_BOOL) {
        *lo = 0.0;
        *hi = 1.0;
    } else if (sm_dtype_is_signed(dt)) {
        *hi = ldexp(1.0, (int)bits - 1) - 1.0;
        *lo = -*hi - 1.0;
    } else {
        *lo = 0.0;
        *hi = ldexp(1.0, (int)bits) - 1.0;
    }
}

void sm_cv_omero(const struct cv *cv, struct sm_run_omero *w)
{
    const struct sm_hist *h = &cv->res->scan.hist;
    const bool hist = !cv->res->no_histogram && h->bins > 0;
    w->set = true;
    type_range(cv->out_dt, &w->min, &w->max);
    if (cv->p->normalize.mode == SM_NORM_NONE) { /* the input's values: p1..p99 */
        w->start = hist ? sm_hist_percentile(h, 1.0) : w->min;
        w->end = hist ? sm_hist_percentile(h, 99.0) : w->max;
        return;
    }
    const bool fl = sm_dtype_is_float(cv->out_dt);
    w->start = 0.0;
    w->end = fl ? 1.0 : w->max; /* the window's ends, or what the divisor maps to 1 */
    w->min = 0.0;
    w->max = w->end;
    if (fl && cv->p->normalize.mode == SM_NORM_SCALE && !sm_dtype_is_float(cv->m->dtype)) {
        double lo, hi; /* a float32 scale of an integer type spans its range / divisor */
        type_range(cv->m->dtype, &lo, &hi);
        const float d = (float)cv->res->norm.divisor;
        w->min = fmin(0.0, (double)((float)lo / d));
        w->max = fmax(1.0, (double)((float)hi / d));
    }
}
