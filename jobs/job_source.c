/* The config's input when it is an engine source (shardmill/source.h), not a Zarr/N5 store:
 * input.format raw, nifti, tiff or hdf5 (job_input.c maps its keys; the engine reads the file),
 * and the report's `input` section of such a source. */
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

json_t *sm_job_source_json(const struct sm_source *s, const json_t *identity)
{
    /* the provenance's input (its path resolved) when the run got that far, else the source's
     * own description */
    json_t *named = sm_source_describe(s);
    json_t *o = json_is_object(identity) ? json_deep_copy(identity) : json_incref(named);
    const struct sm_source_info *in = sm_source_info(s);
    if (o != NULL) { /* SPEC §7: input.store is the path the config named */
        const char *path = json_string_value(json_object_get(named, "path"));
        json_object_set_new(o, "store", json_string(path != NULL ? path : ""));
        json_object_set_new(o, "shape", sm_json_dims(in->shape, in->ndim));
        json_object_set_new(o, "dtype", json_string(sm_dtype_name(in->dtype)));
        json_object_set_new(o, "chunks", json_null());
        json_object_set_new(o, "shards", json_null());
    }
    json_decref(named);
    return o;
}
