/* The only main(): a command table {name, summary, run} (after IOR's aiori table). */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include <shardmill/sm_version.h>

#include "jobs.h"

static const struct sm_cmd commands[] = {
    {"info", "print the metadata of an array or group as JSON", sm_cmd_info},
    {"read", "write a region of an array as raw little-endian values", sm_cmd_read},
    {"plan", "print how a job splits its tiles and shards over N ranks", sm_cmd_plan},
    {"run", "run a YAML pipeline (scan, convert, ingest, read-bench)", sm_cmd_run},
    {"validate", "check a YAML job configuration and print its effective values", sm_cmd_validate},
    {"verify", "re-check every shard of an output against its completion marker", sm_cmd_verify},
    {NULL, NULL, NULL},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: shardmill COMMAND [options]   (shardmill COMMAND --help for details)\n\n"
               "commands:\n");
    for (const struct sm_cmd *c = commands; c->name != NULL; c++) {
        fprintf(f, "  %-10s %s\n", c->name, c->summary);
    }
    fprintf(f, "\n  --version  print the version and commit\n  --help     show this help\n\n"
               "exit status: 0 ok, 2 usage/configuration, 3 invalid or unsupported input data,\n"
               "4 I/O failure, 5 resource limit, 1 anything else;\n"
               "128 + n: `run` stopped by signal n (143 SIGTERM, 130 SIGINT)\n");
}

/* glibc maps every block of 128 KiB or more on its own and unmaps it on free, and with several
 * threads each munmap also stops the other cores to flush their TLBs (~0.1 ms on a virtual
 * machine) and the next such block faults its pages in again. A run makes many of these mid-size
 * blocks (a 16-bit histogram's 512 KiB of counts per thread, codec contexts): blocks below 2 MiB
 * come from the heap instead (the engine maps the larger ones itself, on huge pages:
 * core_alloc_huge.c), and the heap keeps up to 64 MiB of free top instead of trimming it at every
 * free. The head CT's TIFF ingest: 29 munmaps → 12, 0.23 → 0.19 s (GLIBC_TUNABLES A/B). The
 * process's allocation policy is the program's, so it is set here, not in the engine. */
static void tune_malloc(void)
{
    (void)mallopt(M_MMAP_THRESHOLD, 2 << 20);
    (void)mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

int main(int argc, char **argv)
{
    sm_signals_ignore_pipe(); /* SPEC §1: SIGPIPE never kills; a closed pipe is an I/O error */
    tune_malloc();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("shardmill %s (commit %s)\n", SM_VERSION_STRING, SM_GIT_COMMIT);
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (const struct sm_cmd *c = commands; c->name != NULL; c++) {
        if (strcmp(argv[1], c->name) == 0) {
            return c->run(argc - 1, argv + 1);
        }
    }
    /* the command is the `where`: "shardmill: error: frob: unknown command (see ...)" */
    return sm_usage_error(argv[1], "unknown command (see shardmill --help)");
}
