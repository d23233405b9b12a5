/* `shardmill verify OUTPUT` (SPEC §4, §6): re-checks every shard of an output against its
 * completion marker. Exit 0 when everything matches, 1 when verify found problems (listed one per
 * line on stdout), 2 for a usage error, 3 when OUTPUT is not a shardmill output, 4 on I/O errors.
 */
#include "jobs.h"

#include <inttypes.h>
#include <stdio.h>

#include <shardmill/write.h>

int sm_cmd_verify(int argc, char **argv)
{
    bool quiet = false;
    const struct sm_opt opts[] = {
        {"quiet", 'q', SM_OPT_FLAG, NULL, "print nothing on success", &quiet, SM_PATHC_NONE},
        {NULL, 0, SM_OPT_FLAG, NULL, NULL, NULL, SM_PATHC_NONE},
    };
    const struct sm_cmd_spec spec = {
        "verify",
        "OUTPUT [--quiet]",
        "Re-checks a shardmill output against its completion marker shardmill.complete.json: the "
        "SHA-256 of zarr.json, that the marker lists every shard of the grid, and each shard's "
        "existence, size and CRC32C. Prints \"OUTPUT: ok (N shards verified)\", or one line per "
        "problem (\"OUTPUT: KEY: what\"). Exit status: 0 ok, 1 verify failed, 2 usage, 3 not a "
        "shardmill output, 4 I/O error.",
        opts,
        1,
        1};
    const char *pos[1];
    unsigned npos;
    int rc = sm_cli_parse(&spec, argc, argv, pos, &npos);
    if (rc >= 0) {
        return rc;
    }
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_verify_report rep;
    if (sm_output_verify(pos[0], &rep, &err) != SM_OK) {
        sm_verify_report_destroy(&rep);
        return sm_report_error(&err);
    }
    if (rep.nproblems == 0) {
        if (!quiet) {
            printf("%s: ok (%" PRIu64 " shards verified)\n", pos[0], rep.checked);
        }
        sm_verify_report_destroy(&rep);
        return 0;
    }
    for (size_t i = 0; i < rep.nproblems; i++) {
        printf("%s: %s: %s\n", pos[0], rep.problems[i].key, rep.problems[i].what);
    }
    fflush(stdout);
    fprintf(stderr,
            "shardmill: error: %s: verify failed: %zu problem%s (%" PRIu64 " of %" PRIu64
            " shards checked)\n",
            pos[0], rep.nproblems, rep.nproblems == 1 ? "" : "s", rep.checked, rep.shards);
    sm_verify_report_destroy(&rep);
    return 1;
}
