/* The config as the engine's parameters (STYLE B10: YAML -> struct; shardmill/pipeline.h does
 * the rest): the input (a store or a file source), ROI, tile, histogram, output layout and
 * policy, the export, a convert's whole run with its provenance hash; the rank plan `plan`
 * prints; the layout line of `plan` and `validate` and the warning about very many shards. */
#include "jobs_run.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include <shardmill/alloc.h>
#include <shardmill/par.h>
#include <shardmill/url.h>
#include <shardmill/write.h>

#include "jobs.h"

static void dims(const struct sm_cfg_dims *in, struct sm_run_dims *out)
{
    memset(out, 0, sizeof(*out));
    out->set = in->set && !in->is_auto;
    out->n = in->n < SM_MAX_DIMS ? in->n : SM_MAX_DIMS;
    memcpy(out->v, in->v, out->n * sizeof(uint64_t));
}

void sm_job_run_common(const struct sm_job_config *c, struct sm_run_common *rc)
{
    const struct sm_run_common defaults = SM_RUN_COMMON_DEFAULTS;
    *rc = defaults;
    rc->input.store = c->input.store;
    rc->input.array = c->input.array;
    rc->input.http = c->input.http;
    rc->input.http.stop = sm_signals_flag(); /* a transfer in flight ends on SIGTERM */
    rc->input.cache_enabled = c->input.cache_enabled;
    rc->input.cache_max_bytes = c->input.cache_max_bytes;
    rc->input.index_cache_bytes = c->input.index_cache_bytes;
    rc->input.index_cache_entries = c->input.index_cache_entries;
    rc->input.max_object_bytes = c->limits.max_object_bytes;
    rc->input.max_chunk_bytes = c->limits.max_chunk_bytes;
    rc->input.max_requests = c->limits.max_requests;
    dims(&c->roi.offset, &rc->roi_offset);
    dims(&c->roi.shape, &rc->roi_shape);
    dims(&c->tile, &rc->tile);
    rc->hist_bins = (uint32_t)c->histogram.bins;
    rc->hist_range_set = c->histogram.range_set;
    rc->hist_lo = c->histogram.lo;
    rc->hist_hi = c->histogram.hi;
    rc->threads = (int)c->parallel.threads;
    rc->partition = c->parallel.partition; /* the engine's enum (config.h) */
    rc->memory_bytes = c->limits.memory_bytes;
}

void sm_job_run_norm(const struct sm_job_config *c, struct sm_run_norm *n)
{
    *n = (struct sm_run_norm){.mode = c->normalize.mode,
                              .divisor = c->normalize.divisor,
                              .lo = c->normalize.lo,
                              .hi = c->normalize.hi};
}

void sm_job_run_output(const struct sm_job_config *c, struct sm_run_output *o)
{
    const struct sm_run_output defaults = SM_RUN_OUTPUT_DEFAULTS;
    *o = defaults;
    o->path = c->output.path;
    dims(&c->output.shard, &o->shard);
    dims(&c->output.chunk, &o->chunk);
    o->codec = c->output.codec;
    o->level = (int)c->output.codec_level;
    o->policy = sm_job_output_opts(c);
    o->ome.spacing.set = c->input.spacing.set; /* input.spacing/unit/origin (SPEC §2) */
    o->ome.origin.set = c->input.origin.set;
    o->ome.spacing.n = c->input.spacing.n;
    o->ome.origin.n = c->input.origin.n;
    for (unsigned d = 0; d < c->input.spacing.n && d < SM_MAX_DIMS; d++) {
        o->ome.spacing.v[d] = c->input.spacing.v[d];
    }
    for (unsigned d = 0; d < c->input.origin.n && d < SM_MAX_DIMS; d++) {
        o->ome.origin.v[d] = c->input.origin.v[d];
    }
    o->ome.unit = c->input.unit;
    if (c->output.ome_method != NULL) { /* output.ome (SPEC §2) */
        o->ome.levels =
            c->output.ome_levels == 0 ? SM_RUN_OME_AUTO : (unsigned)c->output.ome_levels;
        o->ome.method =
            strcmp(c->output.ome_method, "nearest") == 0 ? SM_RUN_OME_NEAREST : SM_RUN_OME_MEAN;
        o->ome.version = c->output.ome_version;       /* the engine's enum (config.h) */
        o->ome.downsample = c->output.ome_downsample; /* the engine's enum */
    }
}

void sm_job_run_export(const struct sm_job_config *c, struct sm_run_export *x)
{
    const struct sm_run_export defaults = SM_RUN_EXPORT_DEFAULTS;
    *x = defaults;
    x->path = c->export_.hdf5_path;
    x->dataset = c->export_.hdf5_dataset;
    dims(&c->export_.hdf5_chunk, &x->chunk);
    x->deflate = (int)c->export_.hdf5_deflate;
    x->exists = c->export_.hdf5_exists; /* the engine's enum (config.h) */
    x->collective_timeout_s = c->export_.hdf5_timeout_s;
}

bool sm_job_reads_source(const struct sm_job_config *c)
{
    const char *f = c->input.format;
    return f != NULL && strcmp(f, "zarr") != 0 && strcmp(f, "n5") != 0;
}

void sm_job_source_params(const struct sm_job_config *c, struct sm_source_params *p)
{
    memset(p, 0, sizeof(*p));
    p->format = c->input.format;
    p->path = c->input.store;
    /* names outside the schema's DTYPES cannot reach here; an invalid type is refused by open */
    if (c->input.raw_dtype == NULL || !sm_dtype_from_name(c->input.raw_dtype, &p->raw_dtype)) {
        p->raw_dtype = SM_DT_COUNT;
    }
    p->raw_ndim = c->input.raw_shape.set ? c->input.raw_shape.n : 0;
    for (unsigned d = 0; d < p->raw_ndim && d < SM_MAX_DIMS; d++) {
        p->raw_shape[d] = c->input.raw_shape.v[d];
    }
    p->raw_big_endian =
        c->input.raw_byte_order != NULL && strcmp(c->input.raw_byte_order, "big") == 0;
    p->raw_header_bytes = c->input.raw_header_bytes;
    p->hdf5_dataset = c->input.hdf5_dataset;
    p->hdf5_allow_external = c->input.hdf5_allow_external;
    p->max_alloc = c->limits.memory_bytes; /* a strip or tile past the rank's budget is refused */
    p->max_chunk_bytes = c->limits.max_chunk_bytes; /* as is an HDF5 chunk past this */
    p->spacing_given = c->input.spacing.set;
    p->direct = c->input.direct_io; /* the engine's enum */
}

/* The configuration text hashed into provenance: everything that determines the output bytes,
 * so thread counts, report paths and progress settings do not change zarr.json. input.store is
 * left out: the provenance's `input` names the input resolved (its realpath, a URL redacted:
 * run_input_id.c), so `./in.zarr`, `in.zarr/` and the absolute path are one job; every other
 * URL is hashed redacted (issue 32: a password neither shapes config_sha256 nor can be guessed
 * offline from it). */
static void config_hash(const char *effective, char hex[65])
{
    static const char *const skip[] = {
        "parallel.",          "report",       "progress",        "input.cache.",     "input.http.",
        "input.index_cache.", "limits.",      "output.exists",   "output.path",      "output.fsync",
        "output.sync",        "input.store=", "input.direct_io", "output.direct_io", NULL};
    size_t n = strlen(effective);
    char *text = sm_malloc(n + 1);
    size_t w = 0;
    for (const char *line = effective; text != NULL && *line != '\0';) {
        const char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line) + 1 : strlen(line);
        bool drop = false;
        for (size_t i = 0; skip[i] != NULL && !drop; i++) {
            drop = strncmp(line, skip[i], strlen(skip[i])) == 0;
        }
        drop = drop || strncmp(line, "export.", 7) == 0; /* the HDF5 copy: not the Zarr bytes */
        if (!drop) {
            memcpy(text + w, line, len);
            w += len;
        }
        line += len;
    }
    if (text != NULL) {
        text[w] = '\0';
    }
    /* a redacted URL is longer than its secret by at most "<redacted>" per secret: 3n bounds it */
    const size_t cap = 3 * (text != NULL ? w : n) + 64;
    char *red = sm_malloc(cap);
    const char *hashed = text != NULL ? text : effective;
    if (red != NULL) {
        hashed = sm_url_redact(hashed, red, cap);
    } else {
        hashed = ""; /* out of memory: never hash a secret */
    }
    sm_sha256_hex(hashed, strlen(hashed), hex);
    sm_free(red);
    sm_free(text);
}

sm_status sm_job_convert_params(const struct sm_job_config *c, struct sm_convert_run *p,
                                struct sm_job_convert_keep *keep, struct sm_err *err)
{
    const struct sm_convert_run defaults = SM_CONVERT_RUN_DEFAULTS;
    *p = defaults;
    sm_job_run_common(c, &p->c);
    sm_job_run_output(c, &p->output);
    sm_job_run_export(c, &p->export);
    /* output.dtype: float32 unless normalize none (the engine checks it against the input) */
    p->output.dtype_set = c->output.dtype != NULL;
    if (p->output.dtype_set && !sm_dtype_from_name(c->output.dtype, &p->output.dtype)) {
        SM_FAIL_AT(err, SM_E_USAGE, "output.dtype", "unknown data type '%s'", c->output.dtype);
    }
    sm_job_run_norm(c, &p->normalize);
    config_hash(c->effective != NULL ? c->effective : "", keep->config_sha256);
    p->config_sha256 = keep->config_sha256;
    if (sm_job_reads_source(c)) { /* the engine opens the file on every rank */
        sm_job_source_params(c, &keep->sp);
        p->source_params = &keep->sp;
    }
    return SM_OK;
}

sm_status sm_job_open_input(const struct sm_job_config *c, struct sm_store **store,
                            struct sm_array **array, struct sm_err *err)
{
    struct sm_run_common rc;
    sm_job_run_common(c, &rc);
    return sm_run_open_input(&rc.input, rc.memory_bytes, store, array, err);
}

sm_status sm_job_roi(const struct sm_job_config *c, const struct sm_array_meta *m, uint64_t *off,
                     uint64_t *shape, struct sm_err *err)
{
    struct sm_run_common rc;
    sm_job_run_common(c, &rc);
    return sm_run_roi(&rc, m, off, shape, err);
}

sm_status sm_job_output_spec(const struct sm_job_config *c, unsigned nd, const uint64_t *shape,
                             enum sm_dtype dtype, const json_t *attrs, struct sm_output_spec *spec,
                             struct sm_err *err)
{
    struct sm_run_output o;
    sm_job_run_output(c, &o);
    return sm_run_output_spec(&o, nd, shape, dtype, attrs, spec, err);
}

struct sm_output_opts sm_job_output_opts(const struct sm_job_config *c)
{
    struct sm_output_opts o = SM_OUTPUT_OPTS_DEFAULTS;
    o.exists = c->output.exists; /* the engine's enum (config.h) */
    o.sync = c->output.fsync ? c->output.sync : SM_OUTPUT_SYNC_NONE; /* the engine's enum */
    o.direct = c->output.direct_io;                                  /* the engine's enum */
    return o;
}

static size_t dims_str(const uint64_t *v, unsigned n, char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (unsigned d = 0; d < n && k < cap; d++) {
        k += (size_t)snprintf(buf + k, cap - k, "%s%" PRIu64, d ? ", " : "", v[d]);
    }
    if (k < cap) {
        k += (size_t)snprintf(buf + k, cap - k, "]");
    }
    return k < cap ? k : cap;
}

void sm_job_layout_text(const struct sm_job_config *c, const struct sm_output_spec *spec,
                        uint64_t nshards, char *buf, size_t cap)
{
    const bool shard_auto = !c->output.shard.set || c->output.shard.is_auto;
    const bool chunk_auto = !c->output.chunk.set || c->output.chunk.is_auto;
    struct sm_run_output o; /* an OME level 0's inner chunk is the viewers' (issue 35) */
    sm_job_run_output(c, &o);
    struct sm_output_spec level0 = *spec;
    sm_run_ome_chunk(&o, &level0);
    spec = &level0;
    const uint64_t *outer = spec->sharded ? spec->shard : spec->chunk;
    double bytes = (double)sm_dtype_size(spec->dtype);
    for (unsigned d = 0; d < spec->ndim; d++) {
        bytes *= (double)outer[d];
    }
    char s[160], k[160], size[32];
    if (bytes >= 1048576.0) {
        snprintf(size, sizeof(size), "%.1f MiB", bytes / 1048576.0);
    } else {
        snprintf(size, sizeof(size), "%.1f KiB", bytes / 1024.0);
    }
    dims_str(spec->shard, spec->ndim, s, sizeof(s));
    dims_str(spec->chunk, spec->ndim, k, sizeof(k));
    if (spec->sharded) {
        snprintf(buf, cap, "shard %s%s of inner chunks %s%s: %" PRIu64 " shard%s of up to %s", s,
                 shard_auto ? " (auto)" : "", k, chunk_auto ? " (auto)" : "", nshards,
                 nshards == 1 ? "" : "s", size);
    } else {
        snprintf(buf, cap, "unsharded, chunks %s%s: %" PRIu64 " chunk file%s of up to %.1f MiB", k,
                 chunk_auto ? " (auto)" : "", nshards, nshards == 1 ? "" : "s", bytes / 1048576.0);
    }
}

void sm_job_layout_warn(const struct sm_output_spec *spec, uint64_t nshards)
{
    if (nshards <= SM_JOB_MANY_SHARDS) {
        return;
    }
    fprintf(stderr,
            "shardmill: warning: output.shard: this layout makes %" PRIu64 " %s, one file each "
            "(over %u): set `output.shard: auto` (shards of 32-64 MiB) or a larger shard shape\n",
            nshards, spec->sharded ? "shards" : "chunk files", SM_JOB_MANY_SHARDS);
}
