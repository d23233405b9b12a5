/* A group's window (docs/internals/reading.md): the decoded input of a box of whole shards that
 * share input read blocks, read once per pass (a source: split on axis 0 at its blocks over the
 * rank's threads, each block read by one of them; an array: one region read, parallel by itself)
 * and then cut into every shard or tile of the group without reading the input again. */
#include "run_int.h"

#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/box.h"
#include "shardmill/work.h"

void sm_run_window_init(struct sm_run_window *w, unsigned ndim, size_t elem, const uint64_t *block0)
{
    memset(w, 0, sizeof(*w));
    w->ndim = ndim;
    w->elem = elem;
    w->block0 = block0 != NULL && *block0 > 0 ? *block0 : 1;
}

void sm_run_window_free(struct sm_run_window *w)
{
    sm_free(w->buf);
    w->buf = NULL;
    w->cap = 0;
    w->valid = false;
}

struct load {
    struct sm_run_window *w;
    struct sm_source *src;
    uint64_t parts;
    size_t plane; /* bytes of one index of axis 0 in the window */
};

uint64_t sm_run_part_start(uint64_t first, uint64_t n, uint64_t parts, uint64_t unit, uint64_t k)
{
    if (k == 0 || k >= parts) {
        return k == 0 ? 0 : n;
    }
    const uint64_t at = (first + n * k / parts) / unit * unit; /* down to a unit */
    return at > first ? at - first : 0;
}

uint64_t sm_run_part_count(uint64_t first, uint64_t n, uint64_t unit, int threads)
{
    const uint64_t units = n == 0 ? 0 : (first + n - 1) / unit - first / unit + 1;
    const uint64_t most = 4 * (uint64_t)(threads > 0 ? threads : 1);
    return units < most ? units : most;
}

static sm_status load_part(void *user, int thread, uint64_t k, uint64_t *bytes, struct sm_err *err)
{
    const struct load *ld = user;
    const struct sm_run_window *w = ld->w;
    const uint64_t a = sm_run_part_start(w->off[0], w->shape[0], ld->parts, w->block0, k);
    const uint64_t b = sm_run_part_start(w->off[0], w->shape[0], ld->parts, w->block0, k + 1);
    *bytes = 0;
    if (b <= a) {
        return SM_OK; /* a part that rounded away */
    }
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    memcpy(off, w->off, sizeof(off));
    memcpy(shape, w->shape, sizeof(shape));
    off[0] += a;
    shape[0] = b - a;
    return sm_source_read_box(ld->src, thread, off, shape, w->buf + a * ld->plane, err);
}

/* Room for the box [off, off + shape); the window is invalid until it is read. */
static sm_status reserve(struct sm_run_window *w, const uint64_t *off, const uint64_t *shape,
                         size_t *n, struct sm_err *err)
{
    w->valid = false;
    *n = w->elem;
    for (unsigned d = 0; d < w->ndim; d++) {
        w->off[d] = off[d];
        w->shape[d] = shape[d];
        *n *= (size_t)shape[d];
    }
    if (*n > w->cap) {
        sm_free(w->buf);
        w->cap = 0;
        w->buf = sm_malloc(*n == 0 ? 1 : *n);
        if (w->buf == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate a %zu-byte input window", *n);
        }
        w->cap = *n;
    }
    return SM_OK;
}

sm_status sm_run_window_load_source(struct sm_run_window *w, struct sm_source *src, int threads,
                                    const atomic_int *stop, const uint64_t *off,
                                    const uint64_t *shape, struct sm_err *err)
{
    size_t n;
    SM_TRY(reserve(w, off, shape, &n, err));
    if (w->ndim == 0 || shape[0] == 0) {
        w->valid = true;
        return SM_OK;
    }
    struct load ld = {w, src, sm_run_part_count(off[0], shape[0], w->block0, threads),
                      n / (size_t)shape[0]};
    const struct sm_work wk = {.count = ld.parts,
                               .threads = threads > 0 ? threads : 1,
                               .item = load_part,
                               .user = &ld,
                               .stop = stop};
    SM_TRY(sm_work_run(&wk, err));
    w->valid = true;
    return SM_OK;
}

sm_status sm_run_window_load_array(struct sm_run_window *w, struct sm_array *a, const uint64_t *off,
                                   const uint64_t *shape, struct sm_err *err)
{
    size_t n;
    SM_TRY(reserve(w, off, shape, &n, err));
    struct sm_scratch *scratch = NULL;
    SM_TRY(sm_array_scratch_new(&scratch, err));
    const sm_status st = sm_array_read_region(a, off, shape, w->buf, n, scratch, err);
    sm_array_scratch_free(scratch);
    w->valid = st == SM_OK;
    return st;
}

static void *prefetch_main(void *arg)
{
    struct sm_run_prefetch *p = arg;
    sm_err_clear(&p->err);
    p->st = sm_run_window_load_source(p->w, p->src, p->threads, p->stop, p->off, p->shape, &p->err);
    return NULL;
}

sm_status sm_run_prefetch_start(struct sm_run_prefetch *p, struct sm_run_window *w,
                                struct sm_source *src, int threads, const atomic_int *stop,
                                const uint64_t *off, const uint64_t *shape, struct sm_err *err)
{
    p->running = false;
    p->w = w;
    p->src = src;
    p->threads = threads;
    p->stop = stop;
    memcpy(p->off, off, sizeof(p->off[0]) * w->ndim);
    memcpy(p->shape, shape, sizeof(p->shape[0]) * w->ndim);
    if (pthread_create(&p->thread, NULL, prefetch_main, p) != 0) {
        return sm_run_window_load_source(w, src, threads, stop, off, shape, err); /* now */
    }
    p->running = true;
    return SM_OK;
}

sm_status sm_run_prefetch_join(struct sm_run_prefetch *p, struct sm_err *err)
{
    if (!p->running) {
        return SM_OK;
    }
    (void)pthread_join(p->thread, NULL);
    p->running = false;
    if (p->st != SM_OK) {
        *err = p->err;
    }
    return p->st;
}

bool sm_run_window_covers(const struct sm_run_window *w, const uint64_t *off, const uint64_t *shape)
{
    if (!w->valid) {
        return false;
    }
    for (unsigned d = 0; d < w->ndim; d++) {
        if (off[d] < w->off[d] || off[d] + shape[d] > w->off[d] + w->shape[d]) {
            return false;
        }
    }
    return true;
}

void sm_run_window_copy(const struct sm_run_window *w, const uint64_t *off, const uint64_t *shape,
                        void *out)
{
    const uint64_t zero[SM_MAX_DIMS] = {0};
    uint64_t rel[SM_MAX_DIMS];
    for (unsigned d = 0; d < w->ndim; d++) {
        rel[d] = off[d] - w->off[d];
    }
    const struct sm_box_view wv = {w->ndim, w->elem, w->shape};
    const struct sm_box_view ov = {w->ndim, w->elem, shape};
    sm_box_copy(&wv, w->buf, rel, &ov, out, zero, shape);
}

void sm_run_progress_based(void *user, uint64_t done, uint64_t bytes)
{
    struct sm_run_progress_base *b = user;
    b->last_done = done;
    b->last_bytes = bytes;
    if (b->fn != NULL) {
        b->fn(b->user, b->done + done, b->bytes + bytes);
    }
}

void sm_run_progress_next(struct sm_run_progress_base *b)
{
    b->done += b->last_done;
    b->bytes += b->last_bytes;
    b->last_done = b->last_bytes = 0;
}
