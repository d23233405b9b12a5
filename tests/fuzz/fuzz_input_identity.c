/* Fuzz target: the reader of the input-identity record output.exists: auto trusts (issue 32) --
 * sm_output_identity_same (engine/write/write_exists.c) reading an existing zarr.json's
 * attributes.shardmill against this job's identity (engine, config_sha256, input: a source's
 * file records or a Zarr input's store, metadata and objects digests, run_input_id.c).
 * Invariants that must hold for any input abort() when broken: a verdict of "differs" names a
 * member (NUL-terminated, inside the buffer); an identity parsed from the input, written into a
 * zarr.json of its own, is the same as itself.
 * Input: the bytes of an existing zarr.json (seeds: our provenance of a raw source, of a TIFF
 * directory and of a Zarr file store, truncated and hostile variants). */
#include "shardmill/sm_config.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardmill/meta.h"
#include "shardmill/write.h"
#include "fuzz_common.h"

/* A source's identity as run_input_id.c writes it. */
static const char *const fixed =
    "{\"engine\":{\"version\":\"0.1.0\",\"commit\":\"abc\"},\"config_sha256\":"
    "\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\"input\":"
    "{\"path\":\"/d/a.raw\",\"format\":\"raw\",\"shape\":[4,4,4],\"dtype\":\"uint8\",\"file\":"
    "{\"files\":\"1\",\"bytes\":\"64\",\"mtime_ns\":\"1\",\"dev\":\"2049\",\"ino\":\"12\","
    "\"ctime_ns\":\"1786000000000000000\"}}}";

static void check_what(const char *what, size_t cap)
{
    CHECK(strnlen(what, cap) < cap && what[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *doc = malloc(size == 0 ? 1 : size); /* exactly its size: ASan sees an overread */
    CHECK(doc != NULL);
    memcpy(doc, data, size);
    const struct sm_bytes have = {doc, size};
    char what[64];

    /* the fixed identity */
    json_t *id = json_loads(fixed, 0, NULL);
    CHECK(id != NULL);
    what[0] = '\0';
    if (!sm_output_identity_same(have, id, what, sizeof(what))) {
        check_what(what, sizeof(what));
    }
    json_decref(id);

    /* the input's own identity, when it has one: the same as itself, re-written */
    json_t *d = json_loadb((const char *)doc, size, 0, NULL);
    json_t *prov = json_object_get(json_object_get(d, "attributes"), "shardmill");
    if (json_is_object(prov)) {
        what[0] = '\0';
        const bool same = sm_output_identity_same(have, prov, what, sizeof(what));
        if (!same) {
            check_what(what, sizeof(what));
        }
        char *text = json_dumps(d, JSON_COMPACT);
        /* a marked u64 string ("\u0001u64:") is rendered as a number: not a round trip */
        if (text != NULL && strstr(text, "\\u0001") == NULL) {
            const struct sm_bytes again = {(const uint8_t *)text, strlen(text)};
            CHECK(sm_output_identity_same(again, prov, what, sizeof(what)));
        }
        sm_json_free_text(text);
    }
    json_decref(d);

    /* an identity of any shape (the input itself as the identity object) */
    json_t *any = json_loadb((const char *)doc, size, 0, NULL);
    if (json_is_object(any)) {
        what[0] = '\0';
        if (!sm_output_identity_same(have, any, what, sizeof(what))) {
            check_what(what, sizeof(what));
        }
    }
    json_decref(any);
    free(doc);
    return 0;
}
