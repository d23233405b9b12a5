/* The config's input when it is an engine source (shardmill/source.h), not a Zarr/N5 store:
 * input.format raw, nifti, tiff or hdf5 (job_input.c maps its keys; the engine reads the file).
 * The report's `input` section of such a source is report.c's, from the run's result. */
#include "jobs_run.h"

#include <jansson.h>
#include <string.h>

#include <shardmill/source.h>

bool sm_job_reads_source(const struct sm_job_config *c)
{
    const char *f = c->input.format;
    return f != NULL && strcmp(f, "zarr") != 0 && strcmp(f, "n5") != 0;
}
