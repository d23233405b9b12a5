/* Where a finished report goes (SPEC §7; docs/internals/report.md): the atomic writer (tmp +
 * rename, unsigned 64-bit values rendered exactly, which jansson cannot hold) and the short
 * summary on standard output, read back from the report. */
#include <shardmill/sm_config.h>

#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <shardmill/alloc.h>
#include <shardmill/path.h>

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
    /* missing directories are made, as the output's are (checked writable before the job) */
    const char *slash = strrchr(path, '/');
    if (slash != NULL && slash != path) {
        char dir[4096];
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
        if (sm_path_mkdirs(dir, err) != SM_OK) {
            sm_json_free_text(text);
            return err->status;
        }
    }
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    sm_status st = SM_OK;
    if (f == NULL) {
        st = SM_ERR(err, SM_E_IO, "cannot create the report: %s", strerror(errno));
    } else {
        int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
        ok = (fclose(f) == 0) && ok;
        if (!ok || rename(tmp, path) != 0) {
            st = SM_ERR(err, SM_E_IO, "cannot write the report: %s", strerror(errno));
            unlink(tmp);
        }
    }
    sm_json_free_text(text);
    if (st != SM_OK) {
        sm_err_where(err, "%s", path);
    }
    return st;
}

/* ---- the summary on standard output (SPEC §7: never the whole JSON without a report path) ---- */

/* A JSON number (an integer, a real, sm_json_u64's exact integer or a checksum's decimal string,
 * meta.h's policy) as text; "null" for anything else. */
static const char *num_text(const json_t *v, char *buf, size_t cap)
{
    uint64_t u;
    int64_t i;
    if (json_is_real(v)) {
        snprintf(buf, cap, "%.6g", json_real_value(v));
    } else if (sm_json_get_i64(v, &i)) {
        snprintf(buf, cap, "%" PRId64, i);
    } else if (sm_json_get_u64(v, &u)) {
        snprintf(buf, cap, "%" PRIu64, u);
    } else {
        snprintf(buf, cap, "null");
    }
    return buf;
}

/* "[7, 11]" of a JSON array of integers. */
static const char *dims_text(const json_t *a, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v)
    {
        char t[32];
        if (n < cap) {
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", i == 0 ? "" : ", ",
                                  num_text(v, t, sizeof(t)));
        }
    }
    if (n < cap) {
        snprintf(buf + n, cap - n, "]");
    }
    return buf;
}

static const json_t *at(const json_t *o, const char *k1, const char *k2)
{
    const json_t *v = json_object_get(o, k1);
    return k2 != NULL ? json_object_get(v, k2) : v;
}

static void summary_times(FILE *f, const json_t *t)
{
    static const char *const stages[] = {"open",    "range", "hydrate", "decode",
                                         "process", "read",  "write",   "allreduce"};
    if (!json_is_number(json_object_get(t, "total"))) {
        return;
    }
    fprintf(f, "  time: %.1f ms total (", json_number_value(json_object_get(t, "total")));
    const char *sep = "";
    for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++) {
        const json_t *v = json_object_get(t, stages[i]);
        if (json_is_number(v)) {
            fprintf(f, "%s%s %.1f", sep, stages[i], json_number_value(v));
            sep = ", ";
        }
    }
    fprintf(f, ")\n");
}

static void summary_cases(FILE *f, const json_t *rb)
{
    size_t i;
    json_t *cs;
    json_array_foreach(json_object_get(rb, "cases"), i, cs)
    {
        char off[160], shape[160], sum[32];
        const json_t *ns = json_object_get(cs, "read_ns");
        fprintf(f,
                "  case %zu: %s + %s: read %.3f ms median (min %.3f, max %.3f, %lld reps), %.3g "
                "voxels/s, checksum %s\n",
                i + 1, dims_text(json_object_get(cs, "offset"), off, sizeof(off)),
                dims_text(json_object_get(cs, "shape"), shape, sizeof(shape)),
                json_number_value(json_object_get(ns, "median")) / 1e6,
                json_number_value(json_object_get(ns, "min")) / 1e6,
                json_number_value(json_object_get(ns, "max")) / 1e6,
                (long long)json_integer_value(json_object_get(cs, "repetitions")),
                json_number_value(json_object_get(cs, "voxels_per_s")),
                num_text(json_object_get(cs, "checksum"), sum, sizeof(sum)));
    }
}

/* A histogram whose range the min/max pass found (SPEC §5): that range and what lay outside. */
static void summary_minmax(FILE *f, const json_t *h)
{
    const char *from = json_string_value(json_object_get(h, "range_from"));
    if (from == NULL || strcmp(from, "minmax") != 0) {
        return;
    }
    static const char *const keys[] = {"bins", "min", "max", "nan", "inf_pos", "inf_neg"};
    char t[6][64];
    for (int k = 0; k < 6; k++) {
        num_text(json_object_get(h, keys[k]), t[k], sizeof(t[k]));
    }
    fprintf(
        f, "  histogram: %s bins over min..max [%s, %s] (min/max pass), NaN %s, +inf %s, -inf %s\n",
        t[0], t[1], t[2], t[3], t[4], t[5]);
}

/* output.exists: auto over this job's complete, verified output: the one line that says so (a
 * batch log shows why a requeued job ended at once), then the times and the report path. */
static bool summary_skipped(FILE *f, const json_t *rep, const char *report_path)
{
    const json_t *out = json_object_get(rep, "output");
    if (!json_is_true(json_object_get(out, "skipped"))) {
        return false;
    }
    char a[64], b[64];
    fprintf(f,
            "%s: output %s is already complete and verified: nothing to do (%s shards, %s bytes)\n",
            json_string_value(json_object_get(rep, "job")),
            json_string_value(json_object_get(out, "path")),
            num_text(json_object_get(out, "shards"), a, sizeof(a)),
            num_text(json_object_get(out, "bytes"), b, sizeof(b)));
    summary_times(f, json_object_get(rep, "timing_ms"));
    if (report_path != NULL) {
        fprintf(f, "  report: %s\n", report_path);
    }
    return true;
}

void sm_report_summary(FILE *f, const json_t *rep, const char *report_path)
{
    const json_t *res = json_object_get(rep, "result");
    char a[64], b[64], c[64];
    if (summary_skipped(f, rep, report_path)) {
        return;
    }
    fprintf(f, "%s: %s voxels", json_string_value(json_object_get(rep, "job")),
            num_text(at(rep, "result", "voxels"), a, sizeof(a)));
    const json_t *passes = json_object_get(rep, "passes");
    if (json_is_integer(passes) && json_integer_value(passes) > 1) {
        fprintf(f,
                json_object_get(rep, "read_bench") != NULL ? " x %lld timed reads"
                                                           : " x %lld passes",
                (long long)json_integer_value(passes));
    }
    fprintf(f, ", checksum %s, weighted checksum %s\n",
            num_text(json_object_get(res, "checksum"), b, sizeof(b)),
            num_text(json_object_get(res, "weighted_checksum"), c, sizeof(c)));
    const json_t *in = json_object_get(rep, "input");
    if (json_is_object(in)) {
        char shape[160];
        fprintf(f, "  input: %s %s %s\n", json_string_value(json_object_get(in, "store")),
                dims_text(json_object_get(in, "shape"), shape, sizeof(shape)),
                json_string_value(json_object_get(in, "dtype")));
    }
    summary_minmax(f, json_object_get(res, "histogram"));
    const json_t *nm = json_object_get(res, "normalization");
    if (json_is_object(nm)) {
        fprintf(f, "  window: [%s, %s] (%s)\n", num_text(json_object_get(nm, "lo"), a, sizeof(a)),
                num_text(json_object_get(nm, "hi"), b, sizeof(b)),
                json_string_value(json_object_get(nm, "mode")));
    }
    const json_t *out = json_object_get(rep, "output");
    if (json_is_object(out)) {
        fprintf(f, "  output: %s (%s shards, %s bytes",
                json_string_value(json_object_get(out, "path")),
                num_text(json_object_get(out, "shards"), a, sizeof(a)),
                num_text(json_object_get(out, "bytes"), b, sizeof(b)));
        if (json_object_get(res, "output_checksum") != NULL &&
            !json_is_null(json_object_get(res, "output_checksum"))) {
            fprintf(f, ", checksum %s",
                    num_text(json_object_get(res, "output_checksum"), c, sizeof(c)));
        }
        const char *action = json_string_value(json_object_get(out, "action"));
        const char *why = json_string_value(json_object_get(out, "found_problem"));
        if (action != NULL && strcmp(action, "written") != 0) { /* resumed, repaired */
            fprintf(f, "; %s", action);
        }
        if (why != NULL) {
            fprintf(f, " (%s)", why);
        }
        fprintf(f, ")\n");
    }
    summary_cases(f, json_object_get(rep, "read_bench"));
    summary_times(f, json_object_get(rep, "timing_ms"));
    const json_t *fom = at(rep, "figure_of_merit", "voxels_per_s");
    if (json_is_number(fom)) {
        fprintf(f, "  figure of merit: %.4g voxels/s\n", json_number_value(fom));
    }
    if (report_path != NULL) {
        fprintf(f, "  report: %s\n", report_path);
    }
}

sm_status sm_report_emit(const char *path, json_t *report, struct sm_err *err)
{
    if (path != NULL) {
        SM_TRY(sm_report_write(path, report, err));
        if (strcmp(path, "-") == 0) {
            return SM_OK; /* the JSON is the output; a summary would break it */
        }
    }
    sm_report_summary(stdout, report, path);
    if (fflush(stdout) != 0) {
        SM_FAIL(err, SM_E_IO, "cannot write the summary to standard output");
    }
    return SM_OK;
}
