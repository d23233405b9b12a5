/* `shardmill info STORE [--array PATH]`: a node's metadata as JSON on stdout (SPEC §4). With
 * `--config CFG.yaml [--set K=V]...` in place of STORE: the configuration's input (input.store as
 * written, credentials included, input.array, input.s3.*, input.http.*), as slurm/render's
 * pre-check opens it (issue 32 #16: never the redacted text `validate` prints). */
#include "jobs.h"

#include <jansson.h>
#include <stdio.h>

#include <shardmill/array.h>
#include <shardmill/store.h>

#include "config.h"
#include "job_s3.h"
#include "jobs_run.h"

int sm_cmd_info(int argc, char **argv)
{
    const char *array_path = "";
    bool compact = false;
    const char *config = NULL;
    struct sm_str_list sets = {0};
    /* the metadata documents are objects like any other: the same cap as scan and read */
    const struct sm_limits defaults = SM_LIMITS_DEFAULTS;
    uint64_t max_object_bytes = defaults.max_object_bytes;
    const struct sm_opt opts[] = {
        {"array", 0, SM_OPT_STRING, "PATH", "node inside STORE (group member, OME-Zarr level)",
         &array_path, SM_PATHC_NONE},
        {"config", 0, SM_OPT_STRING, "CFG.yaml",
         "open the input of this job configuration instead of STORE (input.store, input.array, "
         "input.s3.*, input.http.*)",
         &config, SM_PATHC_INPUT},
        {"set", 0, SM_OPT_STRINGS, "KEY=VALUE", "with --config: override a key (repeatable)", &sets,
         SM_PATHC_NONE /* each value: its key's row */},
        {"compact", 0, SM_OPT_FLAG, NULL, "print the JSON on one line", &compact, SM_PATHC_NONE},
        {"max-object-bytes", 0, SM_OPT_SIZE, "SIZE",
         "largest metadata document read (512MiB, as limits.max_object_bytes)", &max_object_bytes,
         SM_PATHC_NONE},
        {NULL, 0, SM_OPT_FLAG, NULL, NULL, NULL, SM_PATHC_NONE},
    };
    const struct sm_cmd_spec spec = {
        "info",
        "STORE [--array PATH] [--max-object-bytes SIZE] | --config CFG.yaml [--set KEY=VALUE]...",
        "Prints the Zarr metadata of the array or group at STORE (a directory path, a file:// "
        "URL, an http:// or https:// URL, or s3://bucket/prefix with the AWS_* environment or "
        "profile) as JSON: zarr_format, node_type, shape, dtype, "
        "chunks, shards, codecs, fill_value, attributes. A group lists its members (over HTTP, "
        "which cannot list, the arrays its metadata names); an OME-Zarr group adds "
        "\"multiscales\" with each level's path, shape, dtype and scale. An N5 dataset or group "
        "(attributes.json) has \"format\": \"n5\" and zarr_format null. A document larger "
        "than --max-object-bytes (a Content-Length over it included) is exit 5. --config opens "
        "the input of a job configuration instead (its input.store, input.array, input.s3.* "
        "and input.http.* keys, after the --set overrides).",
        opts,
        0,
        1};
    const char *pos[1];
    unsigned npos;
    int rc = sm_cli_parse(&spec, argc, argv, pos, &npos);
    if (rc >= 0) {
        return rc;
    }
    if (max_object_bytes == 0) {
        return sm_usage_error("info", "--max-object-bytes: must be at least 1 byte");
    }
    if ((npos == 1) == (config != NULL)) {
        return sm_usage_error("info", "give STORE or --config CFG.yaml (usage: shardmill info %s)",
                              spec.usage);
    }
    if (config == NULL && sets.n > 0) {
        return sm_usage_error("info", "--set needs --config");
    }
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_store *store = NULL;
    json_t *desc = NULL;
    struct sm_http_opts http = SM_HTTP_OPTS_DEFAULTS;
    struct sm_job_config c = {0};
    const char *where = pos[0];
    sm_status st = SM_OK;
    if (config != NULL) {
        st = sm_config_load(config, sets.v, sets.n, &c, &err);
        if (st != SM_OK) {
            return sm_report_error(&err);
        }
        where = c.input.store;
        array_path = c.input.array;
        http = c.input.http;
    }
    struct sm_job_s3 s3; /* s3://: endpoint, region and credentials from the AWS environment */
    st = sm_job_s3_resolve(where, c.input.s3_endpoint, c.input.s3_region, c.input.s3_path_style,
                           &s3, &err);
    if (s3.active) {
        http.s3 = &s3.opts;
    }
    if (st == SM_OK) {
        st = sm_job_check_input_store(where, &err); /* missing, or a file: exit 3 */
    }
    if (st == SM_OK) {
        st = sm_store_open_with(where, &http, &store, &err);
    }
    if (st == SM_OK) { /* checked before any byte is allocated (HTTP: on the Content-Length) */
        store->max_object_bytes = max_object_bytes;
        sm_store_backing(store)->max_object_bytes = max_object_bytes;
    }
    if (st == SM_OK) {
        st = sm_node_describe(store, array_path, &desc, &err);
    }
    if (st == SM_OK) {
        char *text = sm_json_dumps(desc, compact ? JSON_COMPACT : JSON_INDENT(2));
        if (text == NULL || puts(text) < 0 || fflush(stdout) != 0) {
            SM_ERR_AT(&err, SM_E_IO, "info", "cannot write to standard output");
            st = err.status;
        }
        sm_json_free_text(text);
    }
    json_decref(desc);
    sm_store_close(store);
    sm_job_s3_destroy(&s3);
    rc = st == SM_OK ? 0 : sm_report_error(&err);
    sm_config_destroy(&c);
    return rc;
}
