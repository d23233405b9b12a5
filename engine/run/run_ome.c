/* OME-Zarr output (SPEC §2 "OME-Zarr output"): which axes each level halves, the levels' shapes
 * and output specs, and the group's OME 0.5 metadata (multiscales with a scale and translation
 * per level, omero's window). The values of the levels are run_pyramid.c's.
 * Spec: https://ngff.openmicroscopy.org/0.5/ (multiscales, axes, coordinateTransformations,
 * omero). See docs/internals/pyramid.md. */
#include "run_int.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/sm_version.h"

/* ---- levels ---- */

/* Marks the axes level k+1 halves, from level k's extents `cur` and spacing `sp` (the level-0
 * spacing times the factors so far): `all` every axis; `yx` the last two (y and x, never z) of
 * more than one voxel; `auto` those whose spacing is below 3/4 of the largest, every one when
 * none is, axes of one voxel left out (halving them changes no value, only the scale). */
static void halved_axes(const struct sm_run_ome *ome, unsigned nd, const uint64_t *cur,
                        const double *sp, bool *halve)
{
    if (ome->downsample == SM_RUN_OME_DOWN_ALL) {
        for (unsigned d = 0; d < nd; d++) {
            halve[d] = true;
        }
        return;
    }
    if (ome->downsample == SM_RUN_OME_DOWN_YX) {
        for (unsigned d = 0; d < nd; d++) {
            halve[d] = d + 2 >= nd && cur[d] > 1;
        }
        return;
    }
    double top = 0.0;
    for (unsigned d = 0; d < nd; d++) {
        top = cur[d] > 1 && sp[d] > top ? sp[d] : top;
    }
    unsigned n = 0;
    for (unsigned d = 0; d < nd; d++) {
        halve[d] = cur[d] > 1 && sp[d] < 0.75 * top;
        n += halve[d];
    }
    for (unsigned d = 0; n == 0 && d < nd; d++) {
        halve[d] = cur[d] > 1;
    }
}

/* Level k -> k+1: cur (extents) and f (cumulative factors) in place. */
static void next_level(const struct sm_run_ome *ome, unsigned nd, uint64_t *cur, uint64_t *f)
{
    double sp[SM_MAX_DIMS];
    bool halve[SM_MAX_DIMS];
    for (unsigned d = 0; d < nd; d++) {
        sp[d] = (ome->spacing.set ? ome->spacing.v[d] : 1.0) * (double)f[d];
    }
    halved_axes(ome, nd, cur, sp, halve);
    for (unsigned d = 0; d < nd; d++) {
        if (halve[d]) {
            cur[d] = (cur[d] + 1) / 2;
            f[d] *= 2;
        }
    }
}

/* The largest extent of the axes the mode halves: y and x for `yx` (z never shrinks), else
 * every axis. */
static uint64_t largest(const struct sm_run_ome *ome, const uint64_t *v, unsigned nd)
{
    uint64_t big = 0;
    for (unsigned d = ome->downsample == SM_RUN_OME_DOWN_YX && nd > 2 ? nd - 2 : 0; d < nd; d++) {
        big = v[d] > big ? v[d] : big;
    }
    return big;
}

/* Levels from `shape` down to the first whose largest axis (of those the mode halves) is <= stop
 * (1: one voxel). */
static unsigned levels_until(const struct sm_run_ome *ome, unsigned nd, const uint64_t *shape,
                             uint64_t stop)
{
    uint64_t cur[SM_MAX_DIMS], f[SM_MAX_DIMS];
    memcpy(cur, shape, nd * sizeof(uint64_t));
    for (unsigned d = 0; d < nd; d++) {
        f[d] = 1;
    }
    unsigned n = 1;
    while (largest(ome, cur, nd) > stop && n < SM_MAX_LEVELS) {
        next_level(ome, nd, cur, f);
        n++;
    }
    return n;
}

void sm_run_ome_factors(const struct sm_run_ome *ome, unsigned nd, const uint64_t *shape,
                        unsigned nlevels, uint64_t (*factor)[SM_MAX_DIMS])
{
    uint64_t cur[SM_MAX_DIMS], f[SM_MAX_DIMS];
    memcpy(cur, shape, nd * sizeof(uint64_t));
    for (unsigned d = 0; d < nd; d++) {
        f[d] = 1;
    }
    for (unsigned k = 0; k < nlevels; k++) {
        memcpy(factor[k], f, nd * sizeof(uint64_t));
        next_level(ome, nd, cur, f);
    }
}

bool sm_run_ome_finite(const struct sm_run_ome *ome, unsigned nd, const uint64_t *shape,
                       struct sm_run_ome_bad *bad)
{
    const unsigned most = levels_until(ome, nd, shape, 1);
    unsigned n = ome->levels == 0 ? 1
                 : ome->levels == SM_RUN_OME_AUTO
                     ? levels_until(ome, nd, shape, SM_RUN_OME_AUTO_MAX)
                     : ome->levels;
    n = n > most ? most : n; /* more is refused by sm_run_ome_levels, naming output.ome.levels */
    uint64_t cur[SM_MAX_DIMS], f[SM_MAX_DIMS];
    memcpy(cur, shape, nd * sizeof(uint64_t));
    for (unsigned d = 0; d < nd; d++) {
        f[d] = 1;
    }
    for (unsigned k = 0; k < n; k++) {
        for (unsigned d = 0; d < nd; d++) { /* level_transforms' arithmetic */
            const double sp = ome->spacing.set ? ome->spacing.v[d] : 1.0;
            const double sc = sp * (double)f[d];
            const double tr =
                (ome->origin.set ? ome->origin.v[d] : 0.0) + sp * ((double)f[d] - 1.0) / 2.0;
            if (!isfinite(sc) || !isfinite(tr)) {
                *bad = (struct sm_run_ome_bad){k, d, isfinite(sc), isfinite(sc) ? tr : sc};
                return false;
            }
        }
        next_level(ome, nd, cur, f);
    }
    return true;
}

/* The smallest shard (in bytes of values) an aligned level may have: level 0's automatic shards
 * hold 32-64 MiB, so two halvings of every axis (three of two axes) stay aligned; deeper levels
 * get layouts of their own instead of as many tiny shards as level 0 has large ones. */
#define ALIGNED_MIN_BYTES (SM_AUTO_SHARD_TARGET / 64)

/* Level k's layout on level 0's shard grid (sm_writer_aligned_levels), f its factor per axis:
 * level 0's shard divided by f, the inner chunk kept where it divides that shard (else the shard
 * is one chunk). False when level 0's shard does not divide by f on an axis it splits, or when
 * the shard would hold less than ALIGNED_MIN_BYTES while level 0 has more than one. */
static bool aligned_layout(const struct sm_output_spec *l0, const uint64_t *f,
                           struct sm_output_spec *lk)
{
    uint64_t voxels = 1;
    bool one = true;
    for (unsigned d = 0; d < l0->ndim; d++) {
        const bool split = l0->shard[d] < l0->shape[d];
        if (split && l0->shard[d] % f[d] != 0) {
            return false;
        }
        const uint64_t sh = (l0->shard[d] + f[d] - 1) / f[d];
        lk->shard[d] = sh;
        lk->chunk[d] = sh % l0->chunk[d] == 0 ? l0->chunk[d] : sh;
        voxels *= sh;
        one = one && !split;
    }
    return one || voxels * sm_dtype_size(l0->dtype) >= ALIGNED_MIN_BYTES;
}

/* Issue 35 item 3: the inner chunk of a sharded 3-D level whose chunk is automatic, for plane
 * viewers and 3-D viewers both (docs/VIEWING.md "Read amplification"). A viewer showing one xy
 * plane fetches every inner chunk the plane crosses, so the chunk is VIEW_DEPTH planes deep (the
 * largest divisor of the shard's depth up to it): at most VIEW_DEPTH planes fetched per plane
 * shown. y and x start at the layout's chunk (SM_AUTO_CHUNK, or the shard's extent when smaller;
 * both made the smaller of the two when powers of two: square tiles for viewers that tile by
 * powers of two, and fetch a chunk once per tile it crosses) and double together while it holds
 * less than VIEW_CHUNK_BYTES of values, the doubled extent divides the shard's and the level
 * extends past it: 128 x 128 for 2- and 4-byte values, 256 x 256 for 1-byte ones; then halved
 * while the chunks a plane crosses would span more than 4/3 of the level's y or x
 * (sm_output_pad_over), so a plane view fetches at most 4 x (4/3)^2 = 7.1 times the plane's
 * values however they compress. The shard is never changed (the partition and the read plan
 * keep theirs). */
#define VIEW_DEPTH 4u
#define VIEW_CHUNK_BYTES ((uint64_t)128 << 10)

void sm_run_ome_chunk(const struct sm_run_output *o, struct sm_output_spec *s)
{
    if (o->ome.levels == 0 || o->chunk.set || s->ndim != 3 || !s->sharded) {
        return;
    }
    uint64_t *c = s->chunk;
    const uint64_t *sh = s->shard, *shape = s->shape;
    uint64_t cz = sh[0] < VIEW_DEPTH ? sh[0] : VIEW_DEPTH;
    while (sh[0] % cz != 0) {
        cz--;
    }
    c[0] = cz;
    const bool pow2 = (c[1] & (c[1] - 1)) == 0 && (c[2] & (c[2] - 1)) == 0;
    if (pow2 && c[1] != c[2]) { /* square: a viewer's tile is the smaller side */
        c[1] = c[2] = c[1] < c[2] ? c[1] : c[2];
    }
    uint64_t bytes = sm_dtype_size(s->dtype) * c[0] * c[1] * c[2];
    while (bytes < VIEW_CHUNK_BYTES && sh[1] % (2 * c[1]) == 0 && sh[2] % (2 * c[2]) == 0 &&
           c[1] < shape[1] && c[2] < shape[2]) {
        c[1] *= 2;
        c[2] *= 2;
        bytes *= 4;
    }
    while (pow2 && c[1] > 1 &&
           (sm_output_pad_over(shape[1], c[1]) ||  /* edge chunks mostly */
            sm_output_pad_over(shape[2], c[2]))) { /* outside the level */
        c[1] /= 2;
        c[2] /= 2;
    }
}

sm_status sm_run_ome_levels(const struct sm_run_output *o, unsigned nd, const uint64_t *shape,
                            enum sm_dtype dtype, struct sm_output_spec *levels, unsigned *nlevels,
                            struct sm_err *err)
{
    *nlevels = 0;
    if (nd < 2 || nd > 3) {
        SM_FAIL_AT(err, SM_E_USAGE, "output.ome",
                   "an OME-Zarr image needs 2 or 3 axes (z, y, x); the output has %u", nd);
    }
    const unsigned most = levels_until(&o->ome, nd, shape, 1);
    const unsigned n = o->ome.levels == SM_RUN_OME_AUTO
                           ? levels_until(&o->ome, nd, shape, SM_RUN_OME_AUTO_MAX)
                           : o->ome.levels;
    if (n < 1 || n > most) {
        SM_FAIL_AT(err, SM_E_USAGE, "output.ome.levels",
                   "%u levels, but a level 0 of this shape allows 1 to %u (halving down to "
                   "one voxel)",
                   n, most);
    }
    uint64_t cur[SM_MAX_DIMS], f[SM_MAX_DIMS];
    memcpy(cur, shape, nd * sizeof(uint64_t));
    for (unsigned d = 0; d < nd; d++) {
        f[d] = 1;
    }
    /* automatic shards: the levels on level 0's grid while they can be (one pass), then each
     * level its own automatic layout (read back from the level above) */
    bool aligned = !o->shard.set && o->ome.version != SM_RUN_OME_V04; /* 0.4: no shards */
    struct sm_run_output lower = *o; /* the read plan's shard depth is level 0's */
    lower.shard_depth = 0;
    for (unsigned k = 0; k < n; k++) {
        SM_TRY(sm_run_output_spec(k == 0 ? o : &lower, nd, cur, dtype, NULL, &levels[k], err));
        levels[k].dimension_names = true;
        if (k > 0 && aligned) {
            struct sm_output_spec a = levels[k];
            aligned = aligned_layout(&levels[0], f, &a);
            levels[k] = aligned ? a : levels[k];
        }
        sm_run_ome_chunk(o, &levels[k]);
        next_level(&o->ome, nd, cur, f);
    }
    *nlevels = n;
    return SM_OK;
}

/* ---- metadata ---- */

static json_t *vec(const double *v, unsigned nd, double times)
{
    json_t *a = json_array();
    for (unsigned d = 0; d < nd; d++) {
        json_array_append_new(a, json_real(v[d] * times));
    }
    return a;
}

/* Level k's coordinateTransformations: its scale, then (levels >= 1, or an origin given) the
 * position of its voxel 0's centre, origin + (f - 1) / 2 x spacing. */
static json_t *level_transforms(const struct sm_run_ome *ome, unsigned nd, const uint64_t *f,
                                unsigned k)
{
    double sc[SM_MAX_DIMS], tr[SM_MAX_DIMS];
    for (unsigned d = 0; d < nd; d++) {
        const double sp = ome->spacing.set ? ome->spacing.v[d] : 1.0;
        sc[d] = sp * (double)f[d];
        tr[d] = (ome->origin.set ? ome->origin.v[d] : 0.0) + sp * ((double)f[d] - 1.0) / 2.0;
    }
    json_t *ct = json_array();
    json_array_append_new(ct, json_pack("{s:s,s:o}", "type", "scale", "scale", vec(sc, nd, 1.0)));
    if (k > 0 || ome->origin.set) {
        json_array_append_new(
            ct, json_pack("{s:s,s:o}", "type", "translation", "translation", vec(tr, nd, 1.0)));
    }
    return ct;
}

static json_t *axes_of(const struct sm_run_ome *ome, unsigned nd)
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
    return axes;
}

/* One greyscale channel whose window is the normalization's, in output values. */
static json_t *omero_of(const struct sm_run_omero *w)
{
    json_t *win = json_pack("{s:f,s:f,s:f,s:f}", "start", w->start, "end", w->end, "min", w->min,
                            "max", w->max);
    return json_pack("{s:[{s:o,s:s,s:b,s:s}],s:{s:s}}", "channels", "window", win, "color",
                     "FFFFFF", "active", 1, "label", "image", "rdefs", "model", "greyscale");
}

json_t *sm_run_ome_attrs(const struct sm_run_ome *ome, unsigned nd, const uint64_t *shape,
                         unsigned nlevels, const struct sm_run_omero *omero, const json_t *extra)
{
    uint64_t(*factor)[SM_MAX_DIMS] = sm_calloc(SM_MAX_LEVELS, sizeof(*factor));
    if (factor == NULL || nlevels > SM_MAX_LEVELS) {
        sm_free(factor);
        return NULL;
    }
    sm_run_ome_factors(ome, nd, shape, nlevels, factor);
    json_t *ds = json_array();
    for (unsigned k = 0; k < nlevels; k++) {
        char path[16];
        snprintf(path, sizeof(path), "%u", k);
        json_array_append_new(ds, json_pack("{s:s,s:o}", "path", path, "coordinateTransformations",
                                            level_transforms(ome, nd, factor[k], k)));
    }
    sm_free(factor);
    const bool nearest = ome->method == SM_RUN_OME_NEAREST;
    const char *desc =
        nearest ? "each value of level k+1 is the first value in C order of the block of level k "
                  "it covers (2 voxels on the axes halved, 1 on the others)"
                : "each value of level k+1 is the float64 sum, in C order, of the float32 values "
                  "of the block of level k it covers (2 voxels on the axes halved, 1 on the "
                  "others), divided by their count and rounded once to the output type (half to "
                  "even for integers)";
    json_t *ms = json_pack("{s:s,s:o,s:o,s:s,s:{s:s,s:s,s:s}}", "name", "image", "axes",
                           axes_of(ome, nd), "datasets", ds, "type", nearest ? "nearest" : "mean",
                           "metadata", "method", nearest ? "shardmill.nearest" : "shardmill.mean",
                           "description", desc, "version", SM_VERSION_STRING);
    json_t *attrs = NULL, *home = NULL;   /* home: the object that holds multiscales, omero */
    if (ome->version == SM_RUN_OME_V04) { /* OME-NGFF 0.4: .zattrs, the version per multiscale */
        if (ms != NULL) {
            json_object_set_new(ms, "version", json_string("0.4"));
        }
        attrs = json_pack("{s:[o]}", "multiscales", ms);
        home = attrs;
    } else {
        attrs = json_pack("{s:{s:s,s:[o]}}", "ome", "version", "0.5", "multiscales", ms);
        home = json_object_get(attrs, "ome");
    }
    if (attrs != NULL && omero != NULL && omero->set) {
        json_object_set_new(home, "omero", omero_of(omero));
    }
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
                            enum sm_dtype dtype, const struct sm_run_omero *omero,
                            const json_t *attrs, const char *pending, struct sm_writer **w,
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
        group = sm_run_ome_attrs(&o->ome, nd, shape, n, omero, attrs);
        if (group == NULL) {
            st = SM_ERR(err, SM_E_NOMEM, "cannot build the OME metadata");
        }
    }
    if (st == SM_OK) {
        levels[0].pending = pending; /* the group's */
        st = sm_writer_new_group(levels, n, group, w, err);
    }
    json_decref(group);
    sm_free(levels);
    return st;
}

void sm_run_provenance_spacing(json_t *attrs, const struct sm_run_ome *ome, unsigned nd)
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
