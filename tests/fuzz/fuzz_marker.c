/* Fuzz target: the readers of the output's own records that resume and verify trust -- the
 * completion marker (sm_marker_parse in engine/write/write_marker.c: the in-place reader of its
 * own layout and the jansson DOM for any other) and the run journal (sm_jrec_scan in
 * write_journal.c) -- over a fixed 2 x 2 x 1 shard grid. The bytes come from a heap copy of
 * exactly their size (ASan catches a read past it). Invariants that must hold for any input
 * abort() when broken: a marker that parses has a known format version and a 64-digit hash, and
 * lists shards of the grid only; a journal applies at most size / SM_JREC_BYTES records, each of
 * a shard of the grid.
 * Input: [0] even: a marker, odd: a journal; the rest is the document. */
#include "shardmill/sm_config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardmill/write.h"
#include "write_int.h" /* checksrc: allow int-header (the record parsers it fuzzes) */
#include "fuzz_common.h"

static struct sm_writer *grid(void)
{
    static struct sm_writer *w;
    if (w == NULL) {
        struct sm_output_spec s = SM_OUTPUT_SPEC_DEFAULTS;
        s.shape[0] = 16, s.shape[1] = 40, s.shape[2] = 32; /* [8,32,32] shards: 2 x 2 x 1 */
        struct sm_err err;
        sm_err_clear(&err);
        CHECK(sm_writer_new(&s, &w, &err) == SM_OK);
    }
    return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    const struct sm_writer *w = grid();
    const uint64_t n = sm_writer_nshards(w);
    const size_t len = size - 1;
    uint8_t *doc = malloc(len == 0 ? 1 : len);
    CHECK(doc != NULL);
    memcpy(doc, data + 1, len);
    struct sm_shard_rec recs[4];
    memset(recs, 0, sizeof(recs));
    CHECK(n == 4);
    if (data[0] % 2 == 0) {
        struct sm_marker_head head;
        char why[160];
        why[0] = '\0';
        if (sm_marker_parse(w, sm_bytes_of(doc, len), recs, &head, why, sizeof(why))) {
            CHECK(head.version >= 1 && head.version <= SM_MARKER_VERSION);
            CHECK(strlen(head.zarr_sha) == 64);
        } else {
            CHECK(strnlen(why, sizeof(why)) < sizeof(why) && why[0] != '\0');
        }
    } else {
        const size_t applied = sm_jrec_scan(sm_bytes_of(doc, len), n, recs);
        CHECK(applied <= len / SM_JREC_BYTES);
        for (uint64_t i = 0; i < n; i++) {
            CHECK(!recs[i].set || applied > 0);
        }
    }
    free(doc);
    return 0;
}
