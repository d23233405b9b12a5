/* The config's input as an engine source (shardmill/source.h) when it is not a Zarr/N5 store:
 * input.format raw, nifti, tiff or hdf5 with their keys (YAML -> struct, STYLE B10; the engine
 * reads the file), and the report's `input` section of such a source. */
#include "jobs_run.h"

#include <jansson.h>
#include <string.h>

#include <shardmill/source.h>

#include "report.h"

bool sm_job_reads_source(const struct sm_job_config *c)
{
    const char *f = c->input.format;
    return f != NULL && strcmp(f, "zarr") != 0 && strcmp(f, "n5") != 0;
}

void sm_job_source_params(const struct sm_job_config *c, struct sm_source_params *out)
{
    struct sm_source_params p;
    memset(&p, 0, sizeof(p));
    p.format = c->input.format;
    p.path = c->input.store;
    /* a name the loader checked (config_yaml.c) */
    if (c->input.raw_dtype != NULL) {
        (void)sm_dtype_from_name(c->input.raw_dtype, &p.raw_dtype);
    }
    p.raw_ndim = c->input.raw_shape.n;
    for (unsigned d = 0; d < p.raw_ndim && d < SM_MAX_DIMS; d++) {
        p.raw_shape[d] = c->input.raw_shape.v[d];
    }
    p.raw_big_endian = c->input.raw_byte_order != NULL && strcmp(c->input.raw_byte_order, "big") == 0;
    p.raw_header_bytes = c->input.raw_header_bytes;
    p.hdf5_dataset = c->input.hdf5_dataset;
    p.hdf5_allow_external = c->input.hdf5_allow_external;
    p.max_alloc = c->limits.max_chunk_bytes;
    *out = p;
}

json_t *sm_job_source_json(const struct sm_source *s)
{
    json_t *o = sm_source_describe(s);
    const struct sm_source_info *in = sm_source_info(s);
    if (o != NULL) {
        json_object_set_new(o, "shape", sm_json_dims(in->shape, in->ndim));
        json_object_set_new(o, "dtype", json_string(sm_dtype_name(in->dtype)));
        json_object_set_new(o, "chunks", json_null());
        json_object_set_new(o, "shards", json_null());
    }
    return o;
}
