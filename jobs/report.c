/* JSON reports (SPEC §7): building blocks shared by the jobs, and an atomic writer that also
 * renders unsigned 64-bit values (weighted checksums) exactly, which jansson cannot hold. */
#include <shardmill/sm_config.h>

#include "report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <shardmill/alloc.h>
#include <shardmill/sm_version.h>

json_t *sm_json_dims(const uint64_t *v, unsigned n)
{
    json_t *a = json_array();
    for (unsigned i = 0; i < n; i++) {
        json_array_append_new(a, sm_json_u64(v[i]));
    }
    return a;
}

json_t *sm_json_hist(const struct sm_hist *h)
{
    json_t *counts = json_array();
    for (uint32_t i = 0; i < h->bins; i++) {
        json_array_append_new(counts, sm_json_u64(h->counts[i]));
    }
    json_t *o = json_object();
    json_object_set_new(o, "bins", json_integer(h->bins));
    json_object_set_new(o, "range", json_pack("[f,f]", h->lo, h->hi));
    json_object_set_new(o, "counts", counts);
    json_object_set_new(o, "underflow", sm_json_u64(h->underflow));
    json_object_set_new(o, "overflow", sm_json_u64(h->overflow));
    json_object_set_new(o, "nan", sm_json_u64(h->nan));
    return o;
}

static json_t *per_class(struct sm_store *s, int bytes)
{
    static const char *const names[SM_IO_NCLASS] = {"metadata", "payload", "index"};
    json_t *o = json_object();
    for (int c = 0; c < SM_IO_NCLASS; c++) {
        uint64_t v = bytes ? sm_store_bytes(s, (enum sm_io_class)c)
                           : sm_store_requests(s, (enum sm_io_class)c);
        json_object_set_new(o, names[c], sm_json_u64(v));
    }
    return o;
}

json_t *sm_json_http(struct sm_store *store)
{
    struct sm_http_stats hs;
    if (!sm_store_http_stats(sm_store_backing(store), &hs)) {
        return json_null();
    }
    return json_pack("{s:b,s:o,s:o}", "range_ignored", hs.range_ignored, "whole_objects",
                     sm_json_u64(hs.whole_fetches), "kept_slices", sm_json_u64(hs.kept_slices));
}

json_t *sm_json_io(struct sm_store *store, const struct sm_array_stats *as)
{
    struct sm_store *backing = sm_store_backing(store);
    struct sm_cache_stats cs;
    sm_store_cache_stats(store, &cs);
    json_t *o = json_object();
    json_object_set_new(o, "requests", per_class(backing, 0));
    json_object_set_new(o, "bytes", per_class(backing, 1));
    json_object_set_new(o, "cache",
                        json_pack("{s:o,s:o,s:o,s:o,s:b}", "hits", sm_json_u64(cs.hits), "misses",
                                  sm_json_u64(cs.misses), "evictions", sm_json_u64(cs.evictions),
                                  "peak_bytes", sm_json_u64(cs.peak_bytes), "enabled",
                                  backing != store));
    json_object_set_new(o, "index_cache",
                        json_pack("{s:o,s:o,s:o}", "hits", sm_json_u64(as->index_cache_hits),
                                  "misses", sm_json_u64(as->index_cache_misses), "peak_bytes",
                                  sm_json_u64(as->index_cache_peak_bytes)));
    json_object_set_new(o, "http", sm_json_http(store));
    return o;
}

json_t *sm_json_engine(void)
{
    return json_pack("{s:s,s:s}", "version", SM_VERSION_STRING, "commit", SM_GIT_COMMIT);
}

sm_status sm_report_write(const char *path, json_t *report, struct sm_err *err)
{
    char *text = sm_json_dumps(report, JSON_INDENT(2));
    if (text == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot format the report");
    }
    if (strcmp(path, "-") == 0) {
        int ok = puts(text) >= 0 && fflush(stdout) == 0;
        sm_json_free_text(text);
        if (!ok) {
            SM_FAIL(err, SM_E_IO, "cannot write the report to standard output");
        }
        return SM_OK;
    }
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    sm_status st = SM_OK;
    if (f == NULL) {
        st = sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "cannot create the report: %s",
                        strerror(errno));
    } else {
        int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
        ok = (fclose(f) == 0) && ok;
        if (!ok || rename(tmp, path) != 0) {
            st = sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "cannot write the report: %s",
                            strerror(errno));
            unlink(tmp);
        }
    }
    sm_json_free_text(text);
    if (st != SM_OK) {
        sm_err_where(err, "%s", path);
    }
    return st;
}
