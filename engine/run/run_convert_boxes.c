/* The boxes a grouped rank reads through its group window (docs/internals/reading.md): its
 * groups, or the scan's slabs of whole planes; each read once into cv->win, the next one read
 * ahead when two windows fit. */
#include "run_convert_int.h"

#include <string.h>

sm_status sm_cv_window_load(struct cv *cv, const uint64_t *off, const uint64_t *shape,
                            struct sm_err *err)
{
    if (sm_run_window_covers(&cv->win, off, shape)) {
        return SM_OK; /* the rank's whole box, kept from the scan */
    }
    if (cv->src != NULL && sm_source_info(cv->src)->access == SM_SOURCE_STREAM) {
        return SM_OK; /* its plan holds the rank's slabs inflated: boxes come from there */
    }
    return cv->src != NULL ? sm_run_window_load_source(&cv->win, cv->src, cv->nthreads,
                                                       cv->p->c.stop, off, shape, err)
                           : sm_run_window_load_array(&cv->win, cv->res->array, off, shape, err);
}

void sm_cv_group_boxes(const struct cv *cv, struct cv_boxes *b)
{
    memset(b, 0, sizeof(*b));
    b->count = cv->gmine.count;
}

static uint64_t plane_bytes(const struct cv *cv, const uint64_t *shape)
{
    uint64_t n = sm_dtype_size(cv->m->dtype);
    for (unsigned d = 1; d < cv->m->ndim; d++) {
        n = shape[d] != 0 && n > UINT64_MAX / shape[d] ? UINT64_MAX : n * shape[d];
    }
    return n;
}

bool sm_cv_planes(const struct cv *cv, struct cv_boxes *b)
{
    const struct sm_tiling *g = &cv->rp.groups;
    if (cv->src == NULL || sm_source_info(cv->src)->access != SM_SOURCE_RANDOM || cv->m->ndim < 2 ||
        cv->gmine.count == 0 || cv->rp.window_bytes == 0) {
        return false;
    }
    bool narrower = false; /* a group holds part of the planes of the rank's run */
    for (unsigned d = 1; d < g->ndim; d++) {
        narrower = narrower || g->grid[d] > 1;
    }
    if (!narrower) {
        return false;
    }
    struct cv_boxes p;
    memset(&p, 0, sizeof(p));
    p.planes = true;
    p.nrun = sm_tiling_run_boxes(g, cv->gmine.first, cv->gmine.count, p.off, p.shape);
    for (unsigned r = 0; r < p.nrun; r++) {
        const uint64_t plane = plane_bytes(cv, p.shape[r]);
        if (plane == 0 || plane > cv->rp.window_bytes) {
            return false; /* a plane would not fit a group's window */
        }
        const uint64_t depth = cv->rp.window_bytes / plane;
        p.depth[r] = depth < p.shape[r][0] ? depth : p.shape[r][0];
        p.before[r + 1] = p.before[r] + (p.shape[r][0] + p.depth[r] - 1) / p.depth[r];
        p.voxels += plane / sm_dtype_size(cv->m->dtype) * p.shape[r][0];
    }
    p.count = p.before[p.nrun];
    *b = p;
    return true;
}

void sm_cv_box(const struct cv *cv, const struct cv_boxes *b, uint64_t k, uint64_t *off,
               uint64_t *shape)
{
    if (!b->planes) {
        sm_tiling_box(&cv->rp.groups, cv->gmine.first + k, off, shape);
        return;
    }
    unsigned r = 0;
    while (r + 1 < b->nrun && k >= b->before[r + 1]) {
        r++;
    }
    memcpy(off, b->off[r], sizeof(b->off[r]));
    memcpy(shape, b->shape[r], sizeof(b->shape[r]));
    const uint64_t at = (k - b->before[r]) * b->depth[r];
    off[0] += at;
    shape[0] = shape[0] - at < b->depth[r] ? shape[0] - at : b->depth[r];
}

sm_status sm_cv_each_box(struct cv *cv, const struct cv_boxes *b, sm_cv_group_fn fn, void *user,
                         struct sm_err *err)
{
    /* read ahead: a source read block by block (a stream's plan holds its slabs), two windows */
    const bool ahead = cv->rp.windows > 1 && cv->src != NULL &&
                       sm_source_info(cv->src)->access != SM_SOURCE_STREAM;
    struct sm_run_prefetch pf = {.running = false};
    for (uint64_t k = 0; k < b->count; k++) {
        uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
        sm_cv_box(cv, b, k, off, shape);
        if (pf.running) { /* the window read ahead holds this box */
            SM_TRY(sm_run_prefetch_join(&pf, err));
            const struct sm_run_window w = cv->win;
            cv->win = cv->ahead;
            cv->ahead = w;
        }
        SM_TRY(sm_run_stop_check(cv->p->c.stop, SM_OK, err));
        SM_TRY(sm_cv_window_load(cv, off, shape, err));
        if (ahead && k + 1 < b->count) {
            uint64_t noff[SM_MAX_DIMS], nshape[SM_MAX_DIMS];
            sm_cv_box(cv, b, k + 1, noff, nshape);
            if (!sm_run_window_covers(&cv->win, noff, nshape)) {
                SM_TRY(sm_run_prefetch_start(&pf, &cv->ahead, cv->src, cv->nthreads, cv->p->c.stop,
                                             noff, nshape, err));
            }
        }
        const sm_status st = fn(cv, user, k, off, shape, err);
        if (st != SM_OK) {
            struct sm_err ignored;
            (void)sm_run_prefetch_join(&pf, &ignored);
            return st;
        }
    }
    return SM_OK;
}

sm_status sm_cv_groups(struct cv *cv, sm_cv_group_fn fn, void *user, struct sm_err *err)
{
    struct cv_boxes b;
    sm_cv_group_boxes(cv, &b);
    return sm_cv_each_box(cv, &b, fn, user, err);
}
