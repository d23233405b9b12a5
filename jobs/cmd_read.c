/* `shardmill read STORE --offset ... --shape ... -o FILE`: a region as raw little-endian values of
 * the array's dtype in C order (SPEC §4). The output is written to a temporary name and renamed
 * on success, so a failed read leaves no partial file; a single read writes it band by band as
 * the threads finish them (sm_array_read_region_to). --repeat and --stats serve the W3 benchmark:
 * read_ns times the region reads alone, the metadata open is outside it. */
#include <shardmill/sm_config.h>

#include "jobs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <shardmill/alloc.h>
#include <shardmill/array.h>
#include <shardmill/clock.h>
#include <shardmill/codec.h>
#include <shardmill/path.h>
#include <shardmill/store.h>
#include <shardmill/threads.h>

#include "job_s3.h"
#include "jobs_run.h"
#include "report.h"

/* Writes n bytes to fd: at offset `at` (pwrite), or at the file position when `at` is -1 (a
 * stream such as standard output). */
static sm_status write_at(int fd, const uint8_t *p, size_t n, off_t at, struct sm_err *err)
{
    while (n > 0) {
        ssize_t w = at < 0 ? write(fd, p, n) : pwrite(fd, p, n, at);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return SM_ERRNO(err, errno, NULL, "write failed");
        }
        p += w;
        n -= (size_t)w;
        at = at < 0 ? at : at + (off_t)w;
    }
    return SM_OK;
}

/* An output file being written: a temporary name beside it, renamed over it on success. */
struct out_file {
    const char *path;
    char tmp[4096];
    int fd;
};

static sm_status out_open(struct out_file *o, const char *path, struct sm_err *err)
{
    o->path = path;
    o->fd = -1;
    if ((size_t)snprintf(o->tmp, sizeof(o->tmp), "%s.tmp.%ld", path, (long)getpid()) >=
        sizeof(o->tmp)) {
        SM_FAIL_AT(err, SM_E_USAGE, path, "output path too long");
    }
    o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (o->fd < 0) {
        int e = errno;
        SM_FAIL_AT(err, SM_E_IO, path, "cannot create output: %s", strerror(e));
    }
    return SM_OK;
}

/* Closes the file and renames it over the path when st is SM_OK; else removes it. */
static sm_status out_close(struct out_file *o, sm_status st, struct sm_err *err)
{
    if (o->fd < 0) {
        return st;
    }
    const bool ok = st == SM_OK; /* else the error is the caller's, with its own place */
    if (close(o->fd) != 0 && st == SM_OK) {
        int e = errno;
        st = SM_ERR(err, SM_E_IO, "close failed: %s", strerror(e));
    }
    o->fd = -1;
    if (st == SM_OK && rename(o->tmp, o->path) != 0) {
        int e = errno;
        st = SM_ERR(err, SM_E_IO, "rename failed: %s", strerror(e));
    }
    if (st != SM_OK) {
        unlink(o->tmp);
        if (ok) {
            sm_err_where(err, "%s", o->path);
        }
    }
    return st;
}

/* A finished band of the region, written at its place while the threads decode the rest. */
static sm_status out_band(void *ctx, const void *bytes, size_t off, size_t len, struct sm_err *err)
{
    const struct out_file *o = ctx;
    const sm_status st = write_at(o->fd, (const uint8_t *)bytes + off, len, (off_t)off, err);
    if (st != SM_OK) {
        sm_err_where(err, "%s", o->path);
    }
    return st;
}

/* Writes bytes to path atomically (tmp + rename), or to stdout for "-". */
static sm_status write_output(const char *path, const uint8_t *p, size_t n, struct sm_err *err)
{
    if (strcmp(path, "-") == 0) {
        sm_status st = write_at(STDOUT_FILENO, p, n, -1, err);
        if (st != SM_OK) {
            sm_err_where(err, "standard output");
        }
        return st;
    }
    struct out_file o;
    SM_TRY(out_open(&o, path, err));
    return out_close(&o, write_at(o.fd, p, n, -1, err), err);
}

static json_t *class_counts(const struct sm_store *s, bool bytes)
{
    static const char *const names[SM_IO_NCLASS] = {"metadata", "payload", "index"};
    json_t *o = json_object();
    for (int c = 0; c < SM_IO_NCLASS; c++) {
        uint64_t v = bytes ? sm_store_bytes(s, (enum sm_io_class)c)
                           : sm_store_requests(s, (enum sm_io_class)c);
        json_object_set_new(o, names[c], json_integer((json_int_t)v));
    }
    return o;
}

static sm_status write_stats(const char *path, const struct sm_array *a, const uint64_t *ns,
                             uint64_t reps, struct sm_err *err)
{
    const struct sm_store *s = sm_array_store(a);
    struct sm_array_stats as;
    sm_array_stats(a, &as);
    json_t *o = json_object();
    json_t *t = json_array();
    for (uint64_t i = 0; i < reps; i++) {
        json_array_append_new(t, json_integer((json_int_t)ns[i]));
    }
    json_object_set_new(o, "read_ns", t);
    json_object_set_new(o, "requests", class_counts(s, false));
    json_object_set_new(o, "bytes", class_counts(s, true));
    json_object_set_new(o, "index_cache",
                        json_pack("{s:I,s:I,s:I}", "hits", (json_int_t)as.index_cache_hits,
                                  "misses", (json_int_t)as.index_cache_misses, "peak_bytes",
                                  (json_int_t)as.index_cache_peak_bytes));
    json_object_set_new(o, "http", sm_json_http(sm_array_store(a)));
    json_object_set_new(o, "chunks",
                        json_pack("{s:I,s:I,s:I,s:I}", "read", (json_int_t)as.chunks_read,
                                  "missing", (json_int_t)as.chunks_missing, "inner_read",
                                  (json_int_t)as.inner_chunks_read, "inner_missing",
                                  (json_int_t)as.inner_chunks_missing));
    json_object_set_new(o, "peak_rss_bytes", json_integer((json_int_t)sm_peak_rss_bytes()));
    uint64_t minor, major;
    sm_page_faults(&minor, &major);
    json_object_set_new(
        o, "page_faults",
        json_pack("{s:I,s:I}", "minor", (json_int_t)minor, "major", (json_int_t)major));
    char *text = sm_json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    sm_status st = SM_OK;
    if (text == NULL) {
        st = SM_ERR(err, SM_E_NOMEM, "cannot format statistics");
    } else {
        st = write_output(path, (const uint8_t *)text, strlen(text), err);
        sm_json_free_text(text);
    }
    return st;
}

/* 0, or the exit status after the output rule (jobs/job_paths.c) refused -o or --stats: one
 * is, lies inside or contains the file store (links resolved), or they overlap. "-" (standard
 * output) and http(s) stores are never compared. */
static int refuse_overlap(const char *output, const char *stats, const char *store)
{
    struct sm_path_use uses[3] = {{"STORE", "input", SM_PATHC_INPUT, store}};
    unsigned n = 1;
    if (strcmp(output, "-") != 0) {
        uses[n++] = (struct sm_path_use){"-o", "output", SM_PATHC_OUTPUT, output};
    }
    if (stats != NULL && strcmp(stats, "-") != 0) {
        uses[n++] = (struct sm_path_use){"--stats", "statistics file", SM_PATHC_REPORT, stats};
    }
    struct sm_err err;
    sm_err_clear(&err);
    return sm_job_check_path_uses(uses, n, &err) == SM_OK ? 0 : sm_report_error(&err);
}

/* What `read` was asked for, once the options are parsed. */
struct read_req {
    const char *store, *array_path, *output, *stats;
    const struct sm_u64_list *offset, *shape;
    uint64_t repeat;
    const struct sm_array_opts *aopts;
    struct sm_http_opts http;
};

/* Opens the store and array, reads the region `repeat` times and writes it (and the stats).
 * *usage_rc is set (non-zero) for an --offset/--shape of the wrong length. */
static sm_status read_region(struct read_req *q, int *usage_rc, struct sm_err *err)
{
    struct sm_store *store = NULL;
    struct sm_array *a = NULL;
    struct sm_scratch *scratch = NULL;
    uint8_t *buf = NULL;
    uint64_t *ns = NULL;
    struct sm_job_s3 s3; /* s3://: endpoint, region and credentials from the AWS environment */
    sm_status st = sm_job_s3_resolve(q->store, NULL, NULL, false, &s3, err);
    if (s3.active) {
        q->http.s3 = &s3.opts;
    }
    if (st == SM_OK) {
        st = sm_job_check_input_store(q->store, err);
    }
    if (st == SM_OK) {
        st = sm_store_open_with(q->store, &q->http, &store, err);
    }
    if (st == SM_OK) {
        st = sm_array_open(store, q->array_path, q->aopts, &a, err);
    }
    uint64_t off[SM_MAX_DIMS] = {0}, ext[SM_MAX_DIMS] = {0};
    size_t nbytes = 0;
    const struct sm_u64_list *offset = q->offset, *shape = q->shape;
    if (st == SM_OK) {
        const struct sm_array_meta *m = sm_array_meta(a);
        if ((offset->set && offset->n != m->ndim) || (shape->set && shape->n != m->ndim)) {
            *usage_rc = sm_usage_error("read", "--offset and --shape need %u values for this array",
                                       m->ndim);
            st = SM_E_USAGE;
        }
        uint64_t n = sm_dtype_size(m->dtype);
        for (unsigned d = 0; st == SM_OK && d < m->ndim; d++) {
            off[d] = offset->set ? offset->v[d] : 0;
            ext[d] = shape->set ? shape->v[d] : (off[d] < m->shape[d] ? m->shape[d] - off[d] : 0);
            if (__builtin_mul_overflow(n, ext[d], &n)) {
                n = UINT64_MAX;
            }
        }
        nbytes = n > SIZE_MAX ? SIZE_MAX : (size_t)n;
        if (st == SM_OK) {
            st = sm_scratch_new(&scratch, err);
        }
    }
    if (st == SM_OK) {
        buf = sm_malloc(nbytes == 0 ? 1 : nbytes);
        ns = sm_calloc(q->repeat, sizeof(uint64_t));
        if (buf == NULL || ns == NULL) {
            st = SM_ERR(err, SM_E_NOMEM, "cannot allocate a %zu-byte region", nbytes);
        }
    }
    /* A single read into a file writes each band of rows as soon as it is decoded, while the
     * threads decode the rest; --repeat (benchmarks) writes after the last read, so read_ns times
     * the reads alone, and standard output, a stream, is written after the read. */
    const bool banded = q->repeat == 1 && strcmp(q->output, "-") != 0;
    struct out_file of = {.fd = -1};
    const struct sm_region_sink sink = {out_band, &of};
    if (st == SM_OK && banded) {
        st = out_open(&of, q->output, err);
    }
    for (uint64_t r = 0; st == SM_OK && r < q->repeat; r++) {
        uint64_t t0 = sm_clock_ns();
        st = sm_array_read_region_to(a, off, ext, buf, nbytes, banded ? &sink : NULL, scratch, err);
        ns[r] = sm_clock_ns() - t0;
    }
    if (banded) {
        st = out_close(&of, st, err);
    } else if (st == SM_OK) {
        st = write_output(q->output, buf, nbytes, err);
    }
    if (st == SM_OK && q->stats != NULL) {
        st = write_stats(q->stats, a, ns, q->repeat, err);
    }
    sm_free(ns);
    sm_free(buf);
    sm_scratch_free(scratch);
    sm_array_close(a);
    sm_store_close(store);
    sm_job_s3_destroy(&s3);
    return st;
}

int sm_cmd_read(int argc, char **argv)
{
    struct sm_array_opts aopts = SM_ARRAY_OPTS_DEFAULTS;
    const char *array_path = "", *output = NULL, *stats = NULL;
    struct sm_u64_list offset = {0}, shape = {0};
    uint64_t repeat = 1;
    uint64_t threads = 0;
    struct sm_http_opts http = SM_HTTP_OPTS_DEFAULTS;
    uint64_t http_timeout_ms = 0, http_retries = http.max_retries,
             http_backoff_ms = http.backoff_base_ms;
    const struct sm_opt opts[] = {
        {"array", 0, SM_OPT_STRING, "PATH", "node inside STORE (group member, OME-Zarr level)",
         &array_path, SM_PATHC_NONE},
        {"offset", 0, SM_OPT_LIST, "z,y,x", "first voxel of the region (default: origin)", &offset,
         SM_PATHC_NONE},
        {"shape", 0, SM_OPT_LIST, "d,h,w",
         "extent of the region, positive lengths (default: to the array's end)", &shape,
         SM_PATHC_NONE},
        {"output", 'o', SM_OPT_STRING, "FILE", "output file, '-' for standard output (required)",
         &output, SM_PATHC_OUTPUT},
        {"repeat", 0, SM_OPT_U64, "N", "read the region N times in-process (benchmarks)", &repeat,
         SM_PATHC_NONE},
        {"stats", 0, SM_OPT_STRING, "FILE",
         "write read timings, I/O counters and page faults as JSON", &stats, SM_PATHC_REPORT},
        {"threads", 0, SM_OPT_U64, "N",
         "OpenMP threads decoding the region's chunks, at most 64 (0 = OMP_NUM_THREADS, else all "
         "cores)",
         &threads, SM_PATHC_NONE},
        {"index-cache-bytes", 0, SM_OPT_SIZE, "SIZE", "shard-index cache bytes, 0 disables (16MiB)",
         &aopts.index_cache_bytes, SM_PATHC_NONE},
        {"index-cache-entries", 0, SM_OPT_U64, "N", "shard-index cache entries, 0 disables (64)",
         &aopts.index_cache_entries, SM_PATHC_NONE},
        {"max-object-bytes", 0, SM_OPT_SIZE, "SIZE", "largest encoded object read (512MiB)",
         &aopts.limits.max_object_bytes, SM_PATHC_NONE},
        {"max-chunk-bytes", 0, SM_OPT_SIZE, "SIZE", "largest decoded chunk (1GiB)",
         &aopts.limits.max_chunk_bytes, SM_PATHC_NONE},
        {"max-region-bytes", 0, SM_OPT_SIZE, "SIZE", "largest region (0 = no limit)",
         &aopts.limits.max_region_bytes, SM_PATHC_NONE},
        {"http-timeout-ms", 0, SM_OPT_U64, "MS",
         "HTTP connect timeout, and abort a transfer stalled this long (10000 / 20000)",
         &http_timeout_ms, SM_PATHC_NONE},
        {"http-retries", 0, SM_OPT_U64, "N", "HTTP retries after the first attempt (4)",
         &http_retries, SM_PATHC_NONE},
        {"http-backoff-ms", 0, SM_OPT_U64, "MS", "first HTTP retry delay, doubling (100)",
         &http_backoff_ms, SM_PATHC_NONE},
        {NULL, 0, SM_OPT_FLAG, NULL, NULL, NULL, SM_PATHC_NONE},
    };
    const struct sm_cmd_spec spec = {
        "read",
        "STORE --offset z,y,x --shape d,h,w -o FILE [options]",
        "Reads a region of the array at STORE and writes it as raw little-endian values of the "
        "array's data type in C order (bool as one 0/1 byte). Missing chunks read as the fill "
        "value. STORE may be a path, file://, http(s):// or s3://bucket/prefix URL (S3: endpoint, "
        "region and credentials from AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, "
        "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN or the AWS_PROFILE profile). The region's chunks "
        "are decoded by --threads OpenMP threads; the bytes do not depend on the thread count. A "
        "failed read leaves no output file. FILE (and the --stats file) may not be, lie "
        "inside or contain a local STORE (exit 2).",
        opts,
        1,
        1};
    const char *pos[1];
    unsigned npos;
    int rc = sm_cli_parse(&spec, argc, argv, pos, &npos);
    if (rc >= 0) {
        return rc;
    }
    if (output == NULL) {
        return sm_usage_error("read", "-o FILE is required ('-' for standard output)");
    }
    if (repeat == 0) {
        return sm_usage_error("read", "--repeat must be at least 1");
    }
    if (threads > 64) {
        return sm_usage_error("--threads", "at most 64, got %" PRIu64, threads);
    }
    aopts.read_threads = (unsigned)threads;
    for (unsigned d = 0; shape.set && d < shape.n; d++) {
        if (shape.v[d] == 0) { /* as roi.shape of a config: an empty region is a usage error */
            return sm_usage_error("--shape", "--shape[%u]: expected a positive integer, got 0", d);
        }
    }
    /* SPEC §6: the files written may not touch the input store they are read from */
    rc = refuse_overlap(output, stats, pos[0]);
    if (rc != 0) {
        return rc;
    }
    if (http_timeout_ms != 0) {
        http.connect_timeout_ms = (long)http_timeout_ms;
        http.low_speed_time_s = (long)((http_timeout_ms + 999) / 1000); /* curl counts seconds */
    }
    http.max_retries = (unsigned)http_retries;
    http.backoff_base_ms = (unsigned)http_backoff_ms;
    sm_threads_warm((int)threads); /* while the metadata is read: threads.h */
    struct read_req q = {pos[0], array_path, output, stats, &offset, &shape, repeat, &aopts, http};
    struct sm_err err;
    sm_err_clear(&err);
    int usage_rc = 0;
    const sm_status st = read_region(&q, &usage_rc, &err);
    if (usage_rc != 0) {
        return usage_rc;
    }
    if (st != SM_OK) {
        sm_err_where(&err, "%s", pos[0]);
        return sm_report_error(&err);
    }
    return 0;
}
