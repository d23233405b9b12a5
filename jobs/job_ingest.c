/* The `ingest` job (SPEC §4): a raw binary or NIfTI-1 volume -> a Zarr v3 array with the chosen
 * shards, chunks and codec, keeping the input's data type. Shards are filled box by box straight
 * from the file (pread of row spans) or from the inflated .nii.gz, so a raw volume streams
 * through memory one shard per thread. Same output safety as convert: atomic shards, journal,
 * completion marker last. */
#include "jobs_run.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include <shardmill/clock.h>
#include <shardmill/stats.h>
#include <shardmill/write.h>

#include "ingest_source.h"
#include "jobs.h"
#include "report.h"

struct ingest {
    const struct sm_volume *v;
    struct sm_checksums *sums; /* one per thread */
    uint64_t stride[SM_CFG_MAX_DIMS];
};

static sm_status fill_shard(void *user, int thread, uint64_t shard, const uint64_t *offset,
                            const uint64_t *shape, void *data, size_t len, struct sm_err *err)
{
    (void)shard;
    (void)len;
    struct ingest *in = user;
    SM_TRY(sm_volume_read_box(in->v, offset, shape, data, err));
    /* SPEC §5 checksums of what was ingested */
    sm_checksums_add_box(&in->sums[thread], in->v->dtype, data, in->v->ndim, in->stride, offset,
                         shape);
    return SM_OK;
}

static json_t *source_json(const struct sm_job_config *c, const struct sm_volume *v)
{
    json_t *o = json_pack("{s:s,s:s,s:o,s:s}", "path", c->input.store, "format", v->format, "shape",
                          sm_json_dims(v->shape, v->ndim), "dtype", sm_dtype_name(v->dtype));
    if (strcmp(v->format, "nifti") == 0) {
        json_object_set_new(o, "pixdim",
                            json_pack("[f,f,f]", v->pixdim[0], v->pixdim[1], v->pixdim[2]));
    }
    return o;
}

sm_status sm_job_ingest(const struct sm_job_config *c, const char *report_path, struct sm_err *err)
{
    const uint64_t t_start = sm_clock_ns();
    struct sm_volume v;
    struct sm_output *out = NULL;
    struct sm_writer *w = NULL;
    const struct sm_output_opts oopts = sm_job_output_opts(c);
    SM_TRY(sm_output_open(c->output.path, &oopts, &out, err));
    sm_status st = sm_volume_open(c, &v, err);
    if (st != SM_OK) {
        sm_output_close(out);
        return st;
    }
    json_t *attrs = json_pack("{s:{s:o,s:o}}", "shardmill", "engine", sm_json_engine(), "source",
                              source_json(c, &v));
    struct sm_output_spec spec;
    st = sm_job_output_spec(c, v.ndim, v.shape, v.dtype, attrs, &spec, err);
    if (st == SM_OK && c->output.dtype != NULL &&
        strcmp(c->output.dtype, sm_dtype_name(v.dtype)) != 0) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                   "ingest keeps the input's data type (%s); got '%s'", sm_dtype_name(v.dtype),
                   c->output.dtype);
        sm_err_where(err, "output.dtype");
        st = err->status;
    }
    if (st == SM_OK) {
        st = sm_writer_new(&spec, &w, err);
    }
    if (st == SM_OK) {
        st = sm_output_begin(out, w, err);
    }
    const int nthreads =
        c->parallel.threads > 0 ? (int)c->parallel.threads : sm_write_default_threads();
    struct sm_checksums sums[64] = {{0, 0}};
    struct ingest in = {&v, sums, {0}};
    for (unsigned d = v.ndim; d-- > 0;) {
        in.stride[d] = d + 1 < v.ndim ? in.stride[d + 1] * v.shape[d + 1] : 1;
    }
    struct sm_write_result wr = {0};
    if (st == SM_OK && nthreads > 64) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "at most 64 threads");
        sm_err_where(err, "parallel.threads");
        st = err->status;
    }
    if (st == SM_OK) {
        const struct sm_write_job job = {
            0,    sm_writer_nshards(w), NULL, nthreads, fill_shard, &in, NULL,
            NULL, sm_signals_flag()};
        st = sm_job_write_output(w, out, &job, &wr, err);
    }
    const double total_ms = (double)(sm_clock_ns() - t_start) / 1e6;
    if (st == SM_OK) {
        struct sm_checksums all = {0, 0};
        for (int i = 0; i < nthreads; i++) {
            all.sum += sums[i].sum;
            all.weighted += sums[i].weighted;
        }
        struct sm_output_stats os;
        sm_output_stats(out, &os);
        uint64_t voxels = 1;
        for (unsigned d = 0; d < v.ndim; d++) {
            voxels *= v.shape[d];
        }
        json_t *rep = json_pack(
            "{s:o,s:s,s:i,s:i,s:o,s:{s:o,s:o,s:o},s:{s:f,s:f},s:{s:o},s:{s:s,s:o,s:o,s:b}}",
            "engine", sm_json_engine(), "job", "ingest", "ranks", 1, "threads", nthreads, "input",
            source_json(c, &v), "result", "voxels", sm_json_u64(voxels), "checksum",
            json_integer((json_int_t)all.sum), "weighted_checksum", sm_json_u64(all.weighted),
            "timing_ms", "total", total_ms, "write",
            (double)(wr.encode_ns + wr.write_ns) / 1e6 / nthreads, "memory", "peak_rss_bytes",
            sm_json_u64(sm_peak_rss_bytes()), "output", "path", sm_output_path(out), "shards",
            sm_json_u64(os.total_shards), "bytes", sm_json_u64(os.total_bytes), "complete", true);
        const char *path = report_path != NULL ? report_path : c->report;
        if (path != NULL) {
            st = sm_report_write(path, rep, err);
        }
        if (st == SM_OK && path != NULL && strcmp(path, "-") != 0) {
            printf("ingest: %s %s volume, %llu voxels -> %s (%llu shards, %.1f ms)\n", v.format,
                   sm_dtype_name(v.dtype), (unsigned long long)voxels, sm_output_path(out),
                   (unsigned long long)os.total_shards, total_ms);
        }
        json_decref(rep);
    }
    json_decref(attrs);
    sm_output_close(out); /* before the writer: it names the shards to clean up */
    sm_writer_free(w);
    sm_volume_close(&v);
    return st;
}
