/* OME-Zarr output (SPEC §2 "OME-Zarr output"): the levels of an image group, their output specs
 * and OME metadata, and the pyramid phase that a run calls after level 0 is written and flushed by
 * every rank and before the completion marker. Level k+1 halves every axis of level k (size
 * ceil(n/2)); each of its values is the mean of the up to 2x2x2 values of level k it covers:
 * their float32 values summed in float64 in C order of the block, divided by their count, rounded
 * once to the output type (round-half-to-even for integers).
 * Spec: https://ngff.openmicroscopy.org/0.5/ (multiscales, axes, coordinateTransformations).
 * Invariant: a level-k+1 shard depends only on the level-k values it covers, read back from the
 * output through array/, so the bytes are the same for any ranks x threads; no rank holds more
 * than one slab of the parent region per thread. See docs/internals/pyramid.md. */
#include "run_int.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/par.h"
#include "shardmill/sm_version.h"

/* ---- levels and metadata ---- */

sm_status sm_run_ome_levels(const struct sm_run_output *o, unsigned nd, const uint64_t *shape,
                            enum sm_dtype dtype, struct sm_output_spec *levels, unsigned *nlevels,
                            struct sm_err *err)
{
    *nlevels = 0;
    if (nd < 2 || nd > 3) {
        FAIL_USAGE(err, "output.ome",
                   "an OME-Zarr image needs 2 or 3 axes (z, y, x); the output has %u", nd);
    }
    uint64_t cur[SM_MAX_DIMS];
    memcpy(cur, shape, nd * sizeof(uint64_t));
    /* levels possible until every axis is 1 voxel */
    unsigned most = 1;
    for (uint64_t big = 0;; most++) {
        big = 0;
        for (unsigned d = 0; d < nd; d++) {
            const uint64_t e = shape[d] >> (most - 1);
            big = e > big ? e : big;
        }
        if (big <= 1 || most >= SM_MAX_LEVELS) {
            break;
        }
    }
    unsigned n = o->ome.levels;
    if (n == SM_RUN_OME_AUTO) { /* stop at the first level whose largest axis is <= 256 */
        n = 1;
        for (;;) {
            uint64_t big = 0;
            for (unsigned d = 0; d < nd; d++) {
                big = cur[d] > big ? cur[d] : big;
            }
            if (big <= SM_RUN_OME_AUTO_MAX || n >= SM_MAX_LEVELS) {
                break;
            }
            for (unsigned d = 0; d < nd; d++) {
                cur[d] = (cur[d] + 1) / 2;
            }
            n++;
        }
        memcpy(cur, shape, nd * sizeof(uint64_t));
    }
    if (n < 1 || n > most) {
        FAIL_USAGE(err, "output.ome.levels",
                   "%u levels, but a level 0 of this shape allows 1 to %u (halving down to "
                   "one voxel)",
                   n, most);
    }
    for (unsigned k = 0; k < n; k++) {
        SM_TRY(sm_run_output_spec(o, nd, cur, dtype, NULL, &levels[k], err));
        levels[k].dimension_names = true;
        for (unsigned d = 0; d < nd; d++) {
            cur[d] = (cur[d] + 1) / 2;
        }
    }
    *nlevels = n;
    return SM_OK;
}

static json_t *vec(const double *v, unsigned nd, double times)
{
    json_t *a = json_array();
    for (unsigned d = 0; d < nd; d++) {
        json_array_append_new(a, json_real(v[d] * times));
    }
    return a;
}

json_t *sm_run_ome_attrs(const struct sm_run_ome *ome, unsigned nd, unsigned nlevels,
                         const json_t *extra)
{
    static const char *const names[] = {"z", "y", "x"};
    json_t *axes = json_array();
    for (unsigned d = 0; d < nd; d++) {
        json_t *ax = json_pack("{s:s,s:s}", "name", names[d + 3 - nd], "type", "space");
        if (ome->unit != NULL && ome->unit[0] != '\0') {
            json_object_set_new(ax, "unit", json_string(ome->unit));
        }
        json_array_append_new(axes, ax);
    }
    double sp[SM_MAX_DIMS];
    for (unsigned d = 0; d < nd; d++) {
        sp[d] = ome->spacing.set ? ome->spacing.v[d] : 1.0;
    }
    json_t *ds = json_array();
    for (unsigned k = 0; k < nlevels; k++) {
        char path[16];
        snprintf(path, sizeof(path), "%u", k);
        json_t *ct = json_array();
        json_array_append_new(
            ct, json_pack("{s:s,s:o}", "type", "scale", "scale", vec(sp, nd, ldexp(1.0, (int)k))));
        if (ome->origin.set) {
            /* the centre of a level-k voxel: the origin shifted by half of (2^k - 1) level-0
             * voxels, so every level lies over the same physical extent */
            double t[SM_MAX_DIMS];
            for (unsigned d = 0; d < nd; d++) {
                t[d] = ome->origin.v[d] + sp[d] * (ldexp(1.0, (int)k) - 1.0) / 2.0;
            }
            json_array_append_new(
                ct, json_pack("{s:s,s:o}", "type", "translation", "translation", vec(t, nd, 1.0)));
        }
        json_array_append_new(
            ds, json_pack("{s:s,s:o}", "path", path, "coordinateTransformations", ct));
    }
    json_t *ms = json_pack("{s:s,s:o,s:o,s:s,s:{s:s,s:s}}", "name", "image", "axes", axes,
                           "datasets", ds, "type", "mean", "metadata", "method",
                           "shardmill: float64 sum of the "
                           "float32 values of each 2x2x2 block in C order / count, rounded once",
                           "version", SM_VERSION_STRING);
    json_t *attrs = json_pack("{s:{s:s,s:[o]}}", "ome", "version", "0.5", "multiscales", ms);
    if (attrs != NULL && extra != NULL) {
        const char *key;
        const json_t *val;
        json_object_foreach((json_t *)(uintptr_t)extra, key, val)
        {
            json_object_set_new(attrs, key, json_deep_copy(val));
        }
    }
    return attrs;
}

sm_status sm_run_ome_writer(const struct sm_run_output *o, unsigned nd, const uint64_t *shape,
                            enum sm_dtype dtype, const json_t *attrs, struct sm_writer **w,
                            struct sm_err *err)
{
    *w = NULL;
    struct sm_output_spec *levels = sm_calloc(SM_MAX_LEVELS, sizeof(*levels));
    if (levels == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate the level specs");
    }
    unsigned n = 0;
    sm_status st = sm_run_ome_levels(o, nd, shape, dtype, levels, &n, err);
    json_t *group = NULL;
    if (st == SM_OK) {
        group = sm_run_ome_attrs(&o->ome, nd, n, attrs);
        if (group == NULL) {
            st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot build the OME metadata");
        }
    }
    if (st == SM_OK) {
        st = sm_writer_new_group(levels, n, group, w, err);
    }
    json_decref(group);
    sm_free(levels);
    return st;
}

void run_provenance_spacing(json_t *attrs, const struct sm_run_ome *ome, unsigned nd)
{
    json_t *pv = json_object_get(attrs, "shardmill");
    if (pv == NULL || !ome->spacing.set) {
        return;
    }
    json_object_set_new(pv, "spacing", vec(ome->spacing.v, nd, 1.0));
    if (ome->unit != NULL && ome->unit[0] != '\0') {
        json_object_set_new(pv, "unit", json_string(ome->unit));
    }
    if (ome->origin.set) {
        json_object_set_new(pv, "origin", vec(ome->origin.v, nd, 1.0));
    }
}

/* ---- spacing and origin from an OME-Zarr input (SPEC §2) ---- */

struct geometry {
    uint8_t have_spacing, have_origin;
    char unit[48];
    double spacing[SM_MAX_DIMS], origin[SM_MAX_DIMS];
};

/* The dataset `leaf` of the multiscales in attrs: its scale and translation, the axes' unit. */
static void geometry_of(const json_t *attrs, const char *leaf, unsigned nd, struct geometry *g)
{
    const json_t *ome = json_object_get(attrs, "ome");
    const json_t *ms = json_array_get(json_object_get(ome != NULL ? ome : attrs, "multiscales"), 0);
    const json_t *axes = json_object_get(ms, "axes");
    const json_t *ds = json_object_get(ms, "datasets");
    for (size_t i = 0; i < json_array_size(ds); i++) {
        const json_t *d = json_array_get(ds, i);
        const char *path = json_string_value(json_object_get(d, "path"));
        if (path == NULL || strcmp(path, leaf) != 0) {
            continue;
        }
        const json_t *ct = json_object_get(d, "coordinateTransformations");
        for (size_t j = 0; j < json_array_size(ct); j++) {
            const json_t *t = json_array_get(ct, j);
            const char *type = json_string_value(json_object_get(t, "type"));
            const bool sc = type != NULL && strcmp(type, "scale") == 0;
            const bool tr = type != NULL && strcmp(type, "translation") == 0;
            const json_t *v = json_object_get(t, sc ? "scale" : "translation");
            if ((!sc && !tr) || json_array_size(v) != nd) {
                continue;
            }
            double *dst = sc ? g->spacing : g->origin;
            bool ok = true;
            for (unsigned k = 0; k < nd; k++) {
                ok = ok && json_is_number(json_array_get(v, k));
                dst[k] = json_number_value(json_array_get(v, k));
                ok = ok && (!sc || dst[k] > 0);
            }
            if (sc) {
                g->have_spacing = ok;
            } else {
                g->have_origin = ok;
            }
        }
    }
    if (json_array_size(axes) == nd) {
        const char *u = json_string_value(json_object_get(json_array_get(axes, nd - 1), "unit"));
        if (u != NULL && strlen(u) < sizeof(g->unit)) {
            snprintf(g->unit, sizeof(g->unit), "%s", u);
        }
    }
}

/* Rank 0 reads the multiscales of the group holding input.array (one metadata request: zarr.json,
 * else .zattrs) and broadcasts the level's spacing, origin and unit. */
static sm_status read_geometry(struct sm_store *store, const char *array, unsigned nd,
                               struct geometry *g, struct sm_err *err)
{
    memset(g, 0, sizeof(*g));
    sm_status st = SM_OK;
    if (sm_par_rank() == 0 && array != NULL && array[0] != '\0') {
        char parent[512];
        snprintf(parent, sizeof(parent), "%s", array);
        size_t n = strlen(parent);
        while (n > 0 && parent[n - 1] == '/') {
            parent[--n] = '\0';
        }
        char *slash = strrchr(parent, '/');
        const char *leaf = slash != NULL ? slash + 1 : parent;
        char key[600];
        const char *docs[2] = {"zarr.json", ".zattrs"};
        for (int k = 0; k < 2 && st == SM_OK && !g->have_spacing; k++) {
            if (slash != NULL) {
                *slash = '\0';
                snprintf(key, sizeof(key), "%s/%s", parent, docs[k]);
                *slash = '/';
            } else {
                snprintf(key, sizeof(key), "%s", docs[k]);
            }
            struct sm_buf b = SM_BUF_INIT;
            bool found = false;
            st = sm_store_get(store, key, sm_range_all(), SM_IO_META, &b, &found, err);
            if (st == SM_OK && found) {
                json_t *doc = json_loadb((const char *)b.ptr, b.len, 0, NULL);
                const json_t *attrs = k == 0 ? json_object_get(doc, "attributes") : doc;
                geometry_of(attrs, leaf, nd, g);
                json_decref(doc);
            }
            sm_buf_free(&b);
        }
    }
    st = sm_par_agree(st, err);
    if (st == SM_OK) {
        st = sm_par_bcast(g, sizeof(*g), 0, err);
    }
    return st;
}

sm_status run_ome_geometry(struct sm_store *store, const char *array, const json_t *input_attrs,
                           unsigned nd, const uint64_t *roi_off, bool read, struct sm_run_ome *ome,
                           char *unit_buf, size_t unit_cap, struct sm_err *err)
{
    if (ome->spacing.set && ome->spacing.n != nd) {
        FAIL_USAGE(err, "input.spacing", "has %u values, the input has %u axes", ome->spacing.n,
                   nd);
    }
    if (ome->origin.set && ome->origin.n != nd) {
        FAIL_USAGE(err, "input.origin", "has %u values, the input has %u axes", ome->origin.n, nd);
    }
    if (ome->spacing.set && ome->origin.set && ome->unit != NULL) {
        return SM_OK; /* all given: nothing to read */
    }
    struct geometry g; /* an OME-Zarr input's group is read only for an OME-Zarr output */
    memset(&g, 0, sizeof(g));
    if (read) {
        SM_TRY(read_geometry(store, array, nd, &g, err));
    }
    const json_t *pv = json_object_get(input_attrs, "shardmill"); /* a shardmill array's own */
    const json_t *psp = json_object_get(pv, "spacing"), *porg = json_object_get(pv, "origin");
    if (!g.have_spacing && json_array_size(psp) == nd) {
        g.have_spacing = 1;
        for (unsigned d = 0; d < nd; d++) {
            g.spacing[d] = json_number_value(json_array_get(psp, d));
            g.have_spacing = g.have_spacing && g.spacing[d] > 0;
        }
        const char *u = json_string_value(json_object_get(pv, "unit"));
        if (g.unit[0] == '\0' && u != NULL && strlen(u) < sizeof(g.unit)) {
            snprintf(g.unit, sizeof(g.unit), "%s", u);
        }
    }
    if (!g.have_origin && json_array_size(porg) == nd) {
        g.have_origin = 1;
        for (unsigned d = 0; d < nd; d++) {
            g.origin[d] = json_number_value(json_array_get(porg, d));
        }
    }
    if (!ome->spacing.set && g.have_spacing) {
        ome->spacing.set = true;
        ome->spacing.n = nd;
        memcpy(ome->spacing.v, g.spacing, sizeof(g.spacing));
    }
    if (!ome->origin.set && g.have_origin) { /* the ROI's first voxel */
        ome->origin.set = true;
        ome->origin.n = nd;
        for (unsigned d = 0; d < nd; d++) {
            const double sp = ome->spacing.set ? ome->spacing.v[d] : 1.0;
            ome->origin.v[d] = g.origin[d] + (double)roi_off[d] * sp;
        }
    }
    if (ome->unit == NULL && g.unit[0] != '\0') {
        snprintf(unit_buf, unit_cap, "%s", g.unit);
        ome->unit = unit_buf;
    }
    return SM_OK;
}

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
    uint64_t step;      /* output planes per slab */
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

/* Output planes [z0, z0 + nz) of a box of shape os (3 axes) at output offset oo, from the parent
 * slab of shape ps whose first plane is output plane z0's first child. */
static void mean_slab(const struct pyramid *py, const uint8_t *slab, const uint64_t *ps,
                      const uint64_t *os, uint64_t z0, uint64_t nz, uint8_t *out)
{
    const size_t e = py->elem;
    const uint64_t sy = ps[1] * ps[2], sx = ps[2];
    for (uint64_t z = 0; z < nz; z++) {
        const uint64_t cz0 = 2 * z, cz1 = cz0 + 2 <= ps[0] ? cz0 + 2 : ps[0];
        for (uint64_t y = 0; y < os[1]; y++) {
            const uint64_t cy0 = 2 * y, cy1 = cy0 + 2 <= ps[1] ? cy0 + 2 : ps[1];
            uint8_t *dst = out + (((z0 + z) * os[1] + y) * os[2]) * e;
            if (py->dt == SM_DT_FLOAT32) {
                float *d = (float *)(void *)dst;
                uint64_t x = 0;
                if (cz1 - cz0 == 2 && cy1 - cy0 == 2) { /* whole 2x2x2 blocks, unrolled */
                    const float *f = (const float *)(const void *)slab;
                    const float *a0 = f + cz0 * sy + cy0 * sx, *a1 = a0 + sx;
                    const float *b0 = a0 + sy, *b1 = b0 + sx;
                    for (; 2 * x + 2 <= ps[2] && x < os[2]; x++) {
                        const uint64_t c = 2 * x;
                        double t = 0.0; /* from 0, in C order of the block, as SPEC §2 sums */
                        t += (double)a0[c];
                        t += (double)a0[c + 1];
                        t += (double)a1[c];
                        t += (double)a1[c + 1];
                        t += (double)b0[c];
                        t += (double)b0[c + 1];
                        t += (double)b1[c];
                        t += (double)b1[c + 1];
                        d[x] = (float)(t / 8.0);
                    }
                }
                for (; x < os[2]; x++) {
                    const uint64_t cx0 = 2 * x, cx1 = cx0 + 2 <= ps[2] ? cx0 + 2 : ps[2];
                    double s = 0.0;
                    for (uint64_t a = cz0; a < cz1; a++) {
                        for (uint64_t b = cy0; b < cy1; b++) {
                            const float *row = (const float *)(const void *)slab + a * sy + b * sx;
                            for (uint64_t c = cx0; c < cx1; c++) {
                                s += (double)row[c];
                            }
                        }
                    }
                    const double cnt = (double)((cz1 - cz0) * (cy1 - cy0) * (cx1 - cx0));
                    d[x] = (float)(s / cnt);
                }
                continue;
            }
            for (uint64_t x = 0; x < os[2]; x++) {
                const uint64_t cx0 = 2 * x, cx1 = cx0 + 2 <= ps[2] ? cx0 + 2 : ps[2];
                double s = 0.0;
                for (uint64_t a = cz0; a < cz1; a++) {
                    for (uint64_t b = cy0; b < cy1; b++) {
                        for (uint64_t c = cx0; c < cx1; c++) {
                            s += load_f32(slab + (a * sy + b * sx + c) * e, py->dt);
                        }
                    }
                }
                const double cnt = (double)((cz1 - cz0) * (cy1 - cy0) * (cx1 - cx0));
                store_mean(dst + x * e, py->dt, s / cnt);
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
            po[d] = 2 * first;
            const uint64_t end = 2 * (first + n) < py->pshape[d] ? 2 * (first + n) : py->pshape[d];
            ps[d] = end - po[d];
        }
        const size_t bytes = (size_t)(ps[0] * ps[1] * ps[2]) * py->elem;
        SM_TRY(sm_buf_reserve(&ts->slab, bytes, err));
        const uint64_t t0 = sm_clock_ns();
        SM_TRY(sm_array_read_region(py->parent, po + pad, ps + pad, ts->slab.ptr, bytes,
                                    ts->scratch, err));
        const uint64_t t1 = sm_clock_ns();
        mean_slab(py, ts->slab.ptr, ps, os, z0, nz, data);
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

/* Output planes per slab: half the parent's inner chunk depth (so a slab decodes each inner
 * chunk once), fewer while the slabs of every thread exceed half of the memory budget. */
static uint64_t slab_step(const struct sm_run_pyramid *p, const struct sm_writer *pw,
                          const struct sm_writer *lw, int threads)
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
    uint64_t step = cz / 2 > 0 ? cz / 2 : 1;
    step = step < obj[0] ? step : obj[0];
    const uint64_t per_plane = 2 * 4 * obj[1] * obj[2] * sm_dtype_size(pm->dtype);
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
        const struct sm_array_meta *pm = sm_writer_meta(pw);
        py.dt = pm->dtype;
        py.elem = sm_dtype_size(pm->dtype);
        py.nd = pm->ndim;
        for (unsigned d = 0; d < 3; d++) {
            py.pshape[d] = d < 3 - py.nd ? 1 : pm->shape[d - (3 - py.nd)];
        }
        py.step = slab_step(p, pw, lw, threads);
        st = open_level(p, store, k - 1, &py.parent, err);
        uint64_t first, count;
        block_of(sm_writer_nshards(lw), &first, &count);
        run_progress_begin(&p->progress, "pyramid", "shards", sm_writer_nshards(lw));
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
        run_progress_end(&p->progress, st == SM_OK);
        wr->written += r.written;
        wr->kept += r.kept;
        wr->bytes += r.bytes;
        wr->fill_ns += r.fill_ns;
        wr->encode_ns += r.encode_ns;
        wr->write_ns += r.write_ns;
        sm_array_close(py.parent);
        py.parent = NULL;
        /* every rank's level k is in place before any rank reads it for level k+1 */
        st = sm_par_agree(run_stop_check(p->stop, st, err), err);
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
