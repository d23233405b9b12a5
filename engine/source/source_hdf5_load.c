/* HDF5 input in the engine with SM_WITH_HDF5: the reader is the module libshardmill_h5source.so
 * (source_hdf5.c, table sm_hdf5_source_module), loaded by the first HDF5 source, so only a run with
 * HDF5 input maps HDF5; here it becomes a source (shape, type, its chunk as the slab, the encoded
 * bytes read from the file counted, the dataset's layout in the provenance) whose chunk buffers
 * stay within the limits (issue 32 item 8): a chunk larger than limits.max_chunk_bytes, or whose
 * buffers exceed limits.memory_bytes, is refused at open; the reads in flight hold at most half the
 * budget. */
#include "shardmill/sm_config.h"

#include "source_hdf5_int.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/dtype.h"
#include "shardmill/module.h"
#include "source_int.h"

/* What source_hdf5.c calls in the engine (as export_load.c's sm_export_hdf5_imports: kept in a
 * static link, checked by tests/startup against the module's undefined symbols). */
typedef void (*sm_h5source_fn)(void);
extern const sm_h5source_fn sm_h5source_imports[];
const sm_h5source_fn sm_h5source_imports[] = {
    (sm_h5source_fn)sm_calloc,     (sm_h5source_fn)sm_free,    (sm_h5source_fn)sm_dtype_name,
    (sm_h5source_fn)sm_err_cause,  (sm_h5source_fn)sm_err_set, (sm_h5source_fn)sm_err_where,
    (sm_h5source_fn)sm_err_set_at,
};

static const struct sm_hdf5_source_ops *ops;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct sm_err load_err;

static void load(void)
{
    const void *table = NULL;
    if (sm_module_load(SM_HDF5_SOURCE_MODULE, SM_HDF5_SOURCE_SYMBOL,
                       sizeof(struct sm_hdf5_source_ops), 0, &table, &load_err) == SM_OK) {
        ops = table;
    }
}

/* A read of a chunked dataset holds up to this many chunks of buffers: the stored bytes (at most
 * the chunk and deflate's overhead), the inflated values and, after a shuffle, the unshuffled ones
 * (source_hdf5_raw.c); HDF5's own H5Dread path likewise holds the stored chunk and a filter's
 * output, which it grows by doubling. */
#define H5_CHUNK_BUFFERS 3u

struct h5 {
    struct sm_h5source *h;
    struct sm_h5source_info info;
    char *path, *dataset;
    /* the gate of the reads in flight: at most `slots` at once (gate false: a contiguous or
     * compact dataset, whose reads hold no chunk, or no budget given) */
    pthread_mutex_t lock;
    pthread_cond_t freed;
    bool gate;
    unsigned slots, busy;
};

static sm_status h5_read_box(void *user, int thread, const uint64_t *off, const uint64_t *shape,
                             void *out, uint64_t *read, struct sm_err *err)
{
    (void)thread;
    struct h5 *s = user;
    if (s->gate) {
        pthread_mutex_lock(&s->lock);
        while (s->busy >= s->slots) {
            pthread_cond_wait(&s->freed, &s->lock);
        }
        s->busy++;
        pthread_mutex_unlock(&s->lock);
    }
    uint64_t fetched = 0;
    const sm_status st = ops->read_box(s->h, off, shape, out, &fetched, err);
    if (s->gate) {
        pthread_mutex_lock(&s->lock);
        s->busy--;
        pthread_cond_signal(&s->freed);
        pthread_mutex_unlock(&s->lock);
    }
    *read = fetched; /* encoded bytes from the file, not the box's values (issue 33) */
    return st;
}

static json_t *h5_describe(void *user)
{
    const struct h5 *s = user;
    struct sm_source_info info = {.ndim = s->info.ndim, .dtype = s->info.dtype, .format = "hdf5"};
    memcpy(info.shape, s->info.shape, sizeof(info.shape));
    json_t *o = sm_src_describe_file(s->path, &info);
    if (o != NULL) {
        json_object_set_new(o, "dataset", json_string(s->dataset));
        json_object_set_new(o, "stored_dtype", json_string(s->info.stored));
        json_object_set_new(o, "layout", json_string(s->info.layout));
        json_object_set_new(o, "filters", json_string(s->info.filters));
    }
    return o;
}

static void h5_close(void *user)
{
    struct h5 *s = user;
    if (s->h != NULL) {
        ops->close(s->h); /* s->h came from the loaded module */
    }
    if (s->gate) {
        pthread_cond_destroy(&s->freed);
        pthread_mutex_destroy(&s->lock);
    }
    sm_free(s->path);
    sm_free(s->dataset);
    sm_free(s);
}

static const struct sm_source_ops h5_ops = {
    .read_box = h5_read_box,
    .describe = h5_describe,
    .close = h5_close,
};

/* The chunk as "[a, b, c]" into buf. */
static void chunk_text(const struct sm_h5source_info *info, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (unsigned d = 0; d < info->ndim && n < cap; d++) {
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRIu64, d > 0 ? ", " : "", info->chunk[d]);
    }
    if (n < cap) {
        snprintf(buf + n, cap - n, "]");
    }
}

/* A chunked dataset's chunk within limits.max_chunk_bytes and its buffers within the budget
 * (p->max_alloc, limits.memory_bytes), checked from the dataset's metadata before any chunk is
 * read; the gate lets as many reads run at once as half the budget holds (at least one). */
static sm_status chunk_limits(const struct sm_source_params *p, struct h5 *s, struct sm_err *err)
{
    const struct sm_h5source_info *info = &s->info;
    if (info->chunk[0] == 0) {
        return SM_OK; /* contiguous or compact: hyperslabs straight from the file */
    }
    uint64_t bytes = sm_dtype_size(info->dtype), bufs = 0;
    bool wraps = false;
    for (unsigned d = 0; d < info->ndim; d++) {
        wraps |= __builtin_mul_overflow(bytes, info->chunk[d], &bytes);
    }
    wraps |= __builtin_mul_overflow(bytes, (uint64_t)H5_CHUNK_BUFFERS, &bufs);
    char chunk[200];
    chunk_text(info, chunk, sizeof(chunk));
    if (p->max_chunk_bytes != 0 && (wraps || bytes > p->max_chunk_bytes)) {
        SM_ERR(err, SM_E_LIMIT,
               "the dataset's chunk %s holds %" PRIu64 " bytes of values, more than "
               "limits.max_chunk_bytes (%" PRIu64 ")",
               chunk, wraps ? UINT64_MAX : bytes, p->max_chunk_bytes);
        sm_err_where(err, "%s: %s", s->path, s->dataset);
        return err->status;
    }
    if (p->max_alloc != 0 && (wraps || bufs > p->max_alloc)) {
        SM_ERR(err, SM_E_LIMIT,
               "reading the dataset's chunk %s of %" PRIu64 " bytes takes up to %u times as "
               "much in buffers (stored, inflated, unshuffled), more than "
               "limits.memory_bytes (%" PRIu64 ")",
               chunk, wraps ? UINT64_MAX : bytes, H5_CHUNK_BUFFERS, p->max_alloc);
        sm_err_where(err, "%s: %s", s->path, s->dataset);
        return err->status;
    }
    if (p->max_alloc != 0 && bufs > 0) {
        const uint64_t slots = p->max_alloc / 2 / bufs;
        s->slots = slots == 0 ? 1 : slots > 65536 ? 65536 : (unsigned)slots;
        if (pthread_mutex_init(&s->lock, NULL) != 0) {
            SM_FAIL(err, SM_E_NOMEM, "cannot create a lock");
        }
        if (pthread_cond_init(&s->freed, NULL) != 0) {
            pthread_mutex_destroy(&s->lock);
            SM_FAIL(err, SM_E_NOMEM, "cannot create a condition variable");
        }
        s->gate = true;
    }
    return SM_OK;
}

sm_status sm_src_open_hdf5(const struct sm_source_params *p, struct sm_source **out,
                           struct sm_err *err)
{
    *out = NULL;
    pthread_once(&load_once, load);
    if (ops == NULL) {
        sm_err_set(err, load_err.status, load_err.file, load_err.line, "%s", load_err.what);
        sm_err_where(err, "%s", load_err.where);
        return err->status;
    }
    struct h5 *s = sm_calloc(1, sizeof(*s));
    if (s == NULL || (s->path = sm_src_strdup(p->path)) == NULL ||
        (s->dataset = sm_src_strdup(p->hdf5_dataset != NULL ? p->hdf5_dataset : "")) == NULL) {
        if (s != NULL) {
            h5_close(s);
        }
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate an HDF5 source");
    }
    const unsigned flags = p->hdf5_allow_external ? SM_H5SOURCE_ALLOW_EXTERNAL : 0;
    sm_status st = ops->open(p->path, p->hdf5_dataset, flags, &s->info, &s->h, err);
    if (st == SM_OK) {
        st = chunk_limits(p, s, err);
    }
    struct sm_source_info info = {.ndim = s->info.ndim, .dtype = s->info.dtype, .format = "hdf5"};
    memcpy(info.shape, s->info.shape, sizeof(info.shape));
    for (unsigned d = 0; d < info.ndim; d++) { /* a chunk, else a plane [1, ...] */
        info.slab[d] = s->info.chunk[0] != 0     ? s->info.chunk[d]
                       : d == 0 && info.ndim > 1 ? 1
                                                 : info.shape[d];
    }
    /* a filtered chunk decodes whole; unfiltered chunks and contiguous data are read in part */
    info.access =
        s->info.chunk[0] != 0 && s->info.filters[0] != '\0' ? SM_SOURCE_BLOCKS : SM_SOURCE_RANDOM;
    info.spacing_set = s->info.spacing_set; /* the export's attributes (SPEC §2.7) */
    info.origin_set = s->info.origin_set;
    memcpy(info.spacing, s->info.spacing, sizeof(info.spacing));
    memcpy(info.origin, s->info.origin, sizeof(info.origin));
    info.unit = s->info.unit[0] != '\0' ? s->info.unit : NULL;
    if (st == SM_OK) {
        st = sm_source_new(&h5_ops, s, &info, out, err);
    }
    if (st != SM_OK) {
        h5_close(s);
    }
    return st;
}
