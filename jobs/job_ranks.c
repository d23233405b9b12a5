/* What the `run` jobs share across ranks (SPEC §1, §7; docs/internals/ranks.md): the plan (each
 * rank's run of tiles or shards, parallel.partition), the reduction of scan results (wrapping sums:
 * order-independent, so the totals do not depend on the rank count), and the report's counters
 * (summed) and timings (max and mean). */
#include "jobs_run.h"

#include <jansson.h>
#include <string.h>

#include <shardmill/alloc.h>
#include <shardmill/par.h>

void sm_job_plan(const struct sm_job_config *c, const struct sm_array_meta *m,
                 const struct sm_tiling *t, int nranks, struct sm_part *parts)
{
    struct sm_read_unit u;
    sm_read_unit_of(m, &u);
    sm_partition_tiles(
        t, &u, c->parallel.partition == SM_PARTITION_BLOCK ? SM_PART_BLOCK : SM_PART_BALANCED,
        nranks, parts);
}

sm_status sm_job_rank_part(const struct sm_job_config *c, const struct sm_array_meta *m,
                           const struct sm_tiling *t, struct sm_part *mine, struct sm_err *err)
{
    const int n = sm_par_size();
    struct sm_part *parts = sm_calloc((size_t)n, sizeof(*parts));
    if (parts == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate the plan of %d ranks", n);
    }
    sm_job_plan(c, m, t, n, parts);
    *mine = parts[sm_par_rank()];
    sm_free(parts);
    return SM_OK;
}

sm_status sm_job_reduce_scan(struct sm_scan_result *r, struct sm_err *err)
{
    if (sm_par_size() == 1) {
        return SM_OK;
    }
    const size_t fixed = 7, n = fixed + r->hist.bins;
    uint64_t *v = sm_malloc(n * sizeof(uint64_t));
    sm_status st = SM_OK;
    if (v == NULL) {
        st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__,
                        "cannot allocate the reduction of %zu counters", n);
    }
    /* every rank must take part in the reduction, so a failure to allocate is agreed first */
    SM_TRY(sm_par_agree(st, err));
    v[0] = r->hist.underflow;
    v[1] = r->hist.overflow;
    v[2] = r->hist.nan;
    v[3] = r->sums.sum;
    v[4] = r->sums.weighted;
    v[5] = r->voxels;
    v[6] = r->tiles;
    if (r->hist.bins != 0) {
        memcpy(v + fixed, r->hist.counts, r->hist.bins * sizeof(uint64_t));
    }
    st = sm_par_sum_u64(v, n, err);
    if (st == SM_OK) {
        r->hist.underflow = v[0];
        r->hist.overflow = v[1];
        r->hist.nan = v[2];
        r->sums.sum = v[3];
        r->sums.weighted = v[4];
        r->voxels = v[5];
        r->tiles = v[6];
        if (r->hist.bins != 0) {
            memcpy(r->hist.counts, v + fixed, r->hist.bins * sizeof(uint64_t));
        }
    }
    sm_free(v);
    return st;
}

/* Integer leaves of a JSON tree in iteration order (jansson keeps insertion order, and every rank
 * builds the same keys in the same order). */
static size_t collect(json_t *o, json_t **leaves, size_t n)
{
    if (json_is_integer(o)) {
        if (leaves != NULL) {
            leaves[n] = o;
        }
        return n + 1;
    }
    if (json_is_object(o)) {
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v)
        {
            n = collect(v, leaves, n);
        }
    }
    return n;
}

static bool is_peak(json_t *root, json_t *leaf)
{
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v)
    {
        if (v == leaf) {
            return strstr(k, "peak") != NULL;
        }
        if (json_is_object(v) && is_peak(v, leaf)) {
            return true;
        }
    }
    return false;
}

sm_status sm_job_reduce_counters(json_t *o, struct sm_err *err)
{
    if (sm_par_size() == 1 || o == NULL) {
        return SM_OK;
    }
    uint64_t count = collect(o, NULL, 0), mine = count;
    SM_TRY(sm_par_max_u64(&count, 1, err));
    json_t **leaves = sm_calloc(count + 1, sizeof(*leaves));
    uint64_t *sum = sm_calloc(2 * count + 1, sizeof(uint64_t));
    sm_status st = SM_OK;
    if (leaves == NULL || sum == NULL) {
        st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot reduce the report counters");
    } else if (mine != count) {
        st = sm_err_set(err, SM_E_INTERNAL, __FILE__, __LINE__,
                        "ranks report %llu and %llu counters", (unsigned long long)mine,
                        (unsigned long long)count);
    }
    st = sm_par_agree(st, err);
    if (st == SM_OK) {
        collect(o, leaves, 0);
        uint64_t *max = sum + count;
        for (size_t i = 0; i < count; i++) {
            sum[i] = max[i] = (uint64_t)json_integer_value(leaves[i]);
        }
        st = sm_par_sum_u64(sum, count, err);
        if (st == SM_OK) {
            st = sm_par_max_u64(max, count, err);
        }
        for (size_t i = 0; st == SM_OK && i < count; i++) {
            json_integer_set(leaves[i], (json_int_t)(is_peak(o, leaves[i]) ? max[i] : sum[i]));
        }
    }
    sm_free(leaves);
    sm_free(sum);
    return st;
}

sm_status sm_job_reduce_timings(json_t *t, struct sm_err *err)
{
    if (!json_is_object(t)) {
        return SM_OK;
    }
    const size_t n = json_object_size(t);
    double *v = sm_calloc(2 * n + 1, sizeof(double));
    sm_status st = v == NULL ? sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__,
                                          "cannot reduce the report timings")
                             : SM_OK;
    SM_TRY(sm_par_agree(st, err));
    const char *k;
    json_t *x;
    size_t i = 0;
    json_object_foreach(t, k, x)
    {
        v[i] = json_number_value(x);
        v[n + i] = v[i];
        i++;
    }
    /* max through the u64 bit pattern is wrong for doubles: order non-negative doubles by their
     * bits, which is monotonic for values >= 0 (timings are) */
    uint64_t *bits = sm_calloc(n + 1, sizeof(uint64_t));
    if (bits == NULL) {
        st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot reduce the report timings");
    }
    st = sm_par_agree(st, err);
    if (st == SM_OK) {
        for (i = 0; i < n; i++) {
            const double d = v[i] > 0.0 ? v[i] : 0.0;
            memcpy(&bits[i], &d, sizeof(d));
        }
        st = sm_par_max_u64(bits, n, err);
    }
    if (st == SM_OK) {
        st = sm_par_sum_f64(v + n, n, err);
    }
    if (st == SM_OK) {
        json_t *mx = json_object(), *mean = json_object();
        const double ranks = (double)sm_par_size();
        i = 0;
        json_object_foreach(t, k, x)
        {
            double d;
            memcpy(&d, &bits[i], sizeof(d));
            json_object_set_new(mx, k, json_real(d));
            json_object_set_new(mean, k, json_real(v[n + i] / ranks));
            json_real_set(x, d); /* the flat fields are the maximum over ranks */
            i++;
        }
        json_object_set_new(t, "max", mx);
        json_object_set_new(t, "mean", mean);
    }
    sm_free(bits);
    sm_free(v);
    return st;
}

sm_status sm_job_gather_records(struct sm_output *out, struct sm_err *err)
{
    struct sm_buf mine = SM_BUF_INIT, all = SM_BUF_INIT;
    sm_status st = sm_par_agree(sm_output_records_export(out, &mine, err), err);
    if (st == SM_OK) {
        st = sm_par_gatherv_bytes(sm_buf_bytes(&mine), &all, 0, err);
    }
    if (st == SM_OK && sm_par_rank() == 0) {
        st = sm_output_records_adopt(out, sm_buf_bytes(&all), err);
    }
    sm_buf_free(&mine);
    sm_buf_free(&all);
    return sm_par_agree(st, err);
}
