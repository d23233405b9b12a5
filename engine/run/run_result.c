/* What a run's report needs over every rank besides its statistics and timings (SPEC §7): the
 * input's I/O counters (`io`), its reads per pass against the kernel's rchar (`io.source.passes`,
 * issue 33) and the peak resident set (`memory.peak_rss_bytes`), reduced by the engine at the end
 * of the run, so the caller reports the result without a collective of its own. Counters are
 * summed (unsigned sums wrap: order-free), peaks take the maximum. */
#include "shardmill/sm_config.h"

#include "run_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardmill/clock.h"
#include "shardmill/par.h"
#include "shardmill/source.h"

void sm_run_io_of(struct sm_store *store, const struct sm_array *array, struct sm_run_io *io)
{
    memset(io, 0, sizeof(*io));
    if (store != NULL) {
        struct sm_store *backing = sm_store_backing(store); /* what really sent requests */
        for (int c = 0; c < SM_IO_NCLASS; c++) {
            io->requests[c] = sm_store_requests(backing, (enum sm_io_class)c);
            io->bytes[c] = sm_store_bytes(backing, (enum sm_io_class)c);
        }
        struct sm_cache_stats cs;
        sm_store_cache_stats(store, &cs);
        io->cache_skipped = cs.bypassed;
        io->cache_enabled = backing != store && !cs.bypassed;
        io->cache_hits = cs.hits;
        io->cache_misses = cs.misses;
        io->cache_evictions = cs.evictions;
        io->cache_peak_bytes = cs.peak_bytes;
        struct sm_http_stats hs;
        io->http = sm_store_http_stats(backing, &hs);
        io->range_ignored = io->http && hs.range_ignored;
        io->whole_objects = hs.whole_fetches;
        io->kept_slices = hs.kept_slices;
    }
    if (array != NULL) {
        struct sm_array_stats as;
        sm_array_stats(array, &as);
        io->index_hits = as.index_cache_hits;
        io->index_misses = as.index_cache_misses;
        io->index_peak_bytes = as.index_cache_peak_bytes;
    }
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

void sm_run_io_add(struct sm_run_io *sum, const struct sm_run_io *x)
{
    for (int c = 0; c < SM_IO_NCLASS; c++) {
        sum->requests[c] += x->requests[c];
        sum->bytes[c] += x->bytes[c];
    }
    /* a run that skipped its cache did not cache, whatever a preflight's store did */
    sum->cache_skipped = sum->cache_skipped || x->cache_skipped;
    sum->cache_enabled = (sum->cache_enabled || x->cache_enabled) && !sum->cache_skipped;
    sum->cache_hits += x->cache_hits;
    sum->cache_misses += x->cache_misses;
    sum->cache_evictions += x->cache_evictions;
    sum->cache_peak_bytes = max_u64(sum->cache_peak_bytes, x->cache_peak_bytes);
    sum->index_hits += x->index_hits;
    sum->index_misses += x->index_misses;
    sum->index_peak_bytes = max_u64(sum->index_peak_bytes, x->index_peak_bytes);
    sum->http = sum->http || x->http;
    sum->range_ignored = sum->range_ignored || x->range_ignored;
    sum->whole_objects += x->whole_objects;
    sum->kept_slices += x->kept_slices;
}

/* The members of struct sm_run_io in two arrays, one summed and one maximised over ranks (flags as
 * 0/1 under the maximum: true if any rank's is). */
enum { IO_NSUM = 2 * SM_IO_NCLASS + 7, IO_NMAX = 7 };

static void io_pack(const struct sm_run_io *io, uint64_t *sum, uint64_t *max)
{
    memcpy(sum, io->requests, sizeof(io->requests));
    memcpy(sum + SM_IO_NCLASS, io->bytes, sizeof(io->bytes));
    uint64_t *s = sum + 2 * SM_IO_NCLASS;
    s[0] = io->cache_hits;
    s[1] = io->cache_misses;
    s[2] = io->cache_evictions;
    s[3] = io->index_hits;
    s[4] = io->index_misses;
    s[5] = io->whole_objects;
    s[6] = io->kept_slices;
    max[0] = io->cache_peak_bytes;
    max[1] = io->index_peak_bytes;
    max[2] = io->cache_enabled;
    max[3] = io->http;
    max[4] = io->range_ignored;
    max[5] = io->cache_skipped;
}

static void io_unpack(const uint64_t *sum, const uint64_t *max, struct sm_run_io *io)
{
    memcpy(io->requests, sum, sizeof(io->requests));
    memcpy(io->bytes, sum + SM_IO_NCLASS, sizeof(io->bytes));
    const uint64_t *s = sum + 2 * SM_IO_NCLASS;
    io->cache_hits = s[0];
    io->cache_misses = s[1];
    io->cache_evictions = s[2];
    io->index_hits = s[3];
    io->index_misses = s[4];
    io->whole_objects = s[5];
    io->kept_slices = s[6];
    io->cache_peak_bytes = max[0];
    io->index_peak_bytes = max[1];
    io->cache_enabled = max[2] != 0;
    io->http = max[3] != 0;
    io->range_ignored = max[4] != 0;
    io->cache_skipped = max[5] != 0;
}

const char *sm_run_pass_name(int i)
{
    static const char *const names[SM_RUN_NPASSES] = {"range", "scan", "write"};
    return i >= 0 && i < SM_RUN_NPASSES ? names[i] : "?";
}

uint64_t sm_run_input_read(const struct sm_run_result *res)
{
    if (res->source != NULL) {
        return sm_source_bytes_read(res->source);
    }
    uint64_t n = 0;
    if (res->store != NULL) {
        struct sm_store *backing = sm_store_backing(res->store); /* below the cache */
        for (int c = 0; c < SM_IO_NCLASS; c++) {
            n += sm_store_bytes(backing, (enum sm_io_class)c);
        }
    }
    return n;
}

bool sm_run_rchar(uint64_t *rchar)
{
    const int fd = open("/proc/self/io", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    char buf[512];
    ssize_t n;
    do {
        n = read(fd, buf, sizeof(buf) - 1);
    } while (n < 0 && errno == EINTR);
    close(fd);
    if (n <= 0) {
        return false;
    }
    buf[n] = '\0';
    const char *p = strstr(buf, "rchar:"); /* the first line: "rchar: 12345" */
    if (p == NULL) {
        return false;
    }
    char *end = NULL;
    errno = 0;
    const unsigned long long v = strtoull(p + 6, &end, 10);
    if (end == p + 6 || errno != 0) {
        return false;
    }
    *rchar = (uint64_t)v;
    return true;
}

/* The passes over ranks (collective, the same count on every rank): bytes and rchar summed and
 * maximised; a pass ran if it did on any rank; rchar is known if it is on every rank. */
static sm_status reduce_passes(struct sm_run_result *res, struct sm_err *err)
{
    enum { K = SM_RUN_NPASSES };
    uint64_t sum[2 * K], max[3 * K + 1];
    for (int i = 0; i < K; i++) {
        const struct sm_run_pass *p = &res->pass[i];
        sum[i] = max[i] = p->bytes_read;
        sum[K + i] = max[K + i] = p->rchar;
        max[2 * K + i] = p->ran;
    }
    max[3 * K] = !res->rchar_known;
    SM_TRY(sm_par_sum_u64(sum, 2 * K, err));
    SM_TRY(sm_par_max_u64(max, 3 * K + 1, err));
    for (int i = 0; i < K; i++) {
        struct sm_run_pass *p = &res->pass[i];
        p->bytes_read = sum[i];
        p->bytes_read_max = max[i];
        p->rchar = sum[K + i];
        p->rchar_max = max[K + i];
        p->ran = max[2 * K + i] != 0;
    }
    res->rchar_known = max[3 * K] == 0;
    res->input_bytes = res->source != NULL ? sm_source_input_bytes(res->source) : 0;
    return SM_OK;
}

sm_status sm_run_reduce_usage(struct sm_run_result *res, struct sm_err *err)
{
    SM_TRY(reduce_passes(res, err));
    struct sm_run_io mine;
    sm_run_io_of(res->store, res->array, &mine);
    sm_run_io_add(&mine, &res->preflight); /* the caller's requests before the run */
    uint64_t sum[IO_NSUM], max[IO_NMAX];
    io_pack(&mine, sum, max);
    max[IO_NMAX - 1] = sm_peak_rss_bytes(); /* measured now: the run's end on this rank */
    SM_TRY(sm_par_sum_u64(sum, IO_NSUM, err));
    SM_TRY(sm_par_max_u64(max, IO_NMAX, err));
    io_unpack(sum, max, &res->io);
    res->peak_rss_bytes = max[IO_NMAX - 1];
    return SM_OK;
}
