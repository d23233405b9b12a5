/* output.exists: auto (SPEC §6, write.h): whether an existing output is this job's, complete and
 * verifying, or to resume or repair, decided from zarr.json's provenance and the marker; and the
 * first member where two JSON documents differ, which names what changed. */
#include "shardmill/sm_config.h"

#include "write_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/crc32c.h"
#include "shardmill/fs.h"
#include "shardmill/path.h"

#define SM_PROVENANCE_KEY "shardmill" /* zarr.json attributes.shardmill: the provenance */

bool sm_output_first_diff(json_t *a, json_t *b, char *path, size_t cap);

/* A JSON document read under meta.h's number policy (every integer exact); NULL when it does not
 * parse, with the reason in *e. */
json_t *sm_output_load_doc(struct sm_bytes b, struct sm_err *e)
{
    json_t *j = NULL;
    sm_err_clear(e);
    (void)sm_json_load((const char *)b.ptr, b.len, SM_ZARR_JSON, &j, e);
    return j;
}

/* The attributes of a document: zarr.json's "attributes" object (whether or not the document
 * says zarr_format); a Zarr v2 .zattrs, which has none, is the attributes itself. */
json_t *sm_output_attrs_of(json_t *doc)
{
    json_t *a = json_object_get(doc, "attributes");
    return json_is_object(a) ? a : doc;
}

/* {"attributes": {"shardmill": {m: v}}} for every member m of `identity`, v taken from `prov`
 * (the existing provenance; a member it lacks stays out) or from identity itself. */
static json_t *identity_doc(json_t *identity, json_t *prov)
{
    json_t *sub = json_object();
    const char *key;
    json_t *v;
    json_object_foreach(identity, key, v)
    {
        json_t *have = prov != NULL ? json_object_get(prov, key) : v;
        if (have != NULL) {
            json_object_set(sub, key, have);
        }
    }
    return json_pack("{s:{s:o}}", "attributes", SM_PROVENANCE_KEY, sub);
}

bool sm_output_identity_same(struct sm_bytes have, const json_t *identity, char *what, size_t cap)
{
    struct sm_err e;
    json_t *doc = sm_output_load_doc(have, &e);
    if (doc == NULL) { /* same_identity refuses it first: a parse failure is an error */
        snprintf(what, cap, "its bytes (not JSON)");
        return false;
    }
    /* compare like with like: this job's identity as text, read back the way the existing
     * document was read */
    char *text = sm_json_dumps(identity, JSON_COMPACT);
    json_t *want_id = text != NULL ? sm_output_load_doc(sm_bytes_of(text, strlen(text)), &e) : NULL;
    sm_json_free_text(text);
    json_t *prov = json_object_get(sm_output_attrs_of(doc), SM_PROVENANCE_KEY);
    json_t *none = json_object(); /* no provenance: every member of the identity differs */
    json_t *a =
        json_is_object(want_id) ? identity_doc(want_id, json_is_object(prov) ? prov : none) : NULL;
    json_t *b = json_is_object(want_id) ? identity_doc(want_id, NULL) : NULL;
    what[0] = '\0';
    const bool differ = a == NULL || b == NULL || sm_output_first_diff(a, b, what, cap);
    json_decref(a);
    json_decref(b);
    json_decref(none);
    json_decref(want_id);
    json_decref(doc);
    if (differ && what[0] == '\0') {
        snprintf(what, cap, "its bytes");
    }
    return !differ;
}

/* SM_OK when the existing zarr.json `have` carries `identity` in attributes.shardmill, else
 * SM_E_USAGE naming the first member that differs. */
static sm_status same_identity(const struct sm_output *o, const char *name, struct sm_bytes have,
                               const json_t *identity, struct sm_err *err)
{
    json_t *doc = sm_output_load_doc(have, err);
    if (doc == NULL) { /* a document that does not parse is an error, never "another job's" */
        sm_err_where(err, "%s/%s", o->root, name);
        return err->status;
    }
    json_decref(doc);
    char what[256];
    if (sm_output_identity_same(have, identity, what, sizeof(what))) {
        return SM_OK;
    }
    SM_ERR_AT(err, SM_E_USAGE, o->root,
              "output.exists: auto: another job's output: its %s differs from this "
              "job's in %s; use overwrite or another output.path",
              name, what);
    return err->status;
}

/* The marker's verdict: COMPLETE when sm_output_verify finds nothing, else DAMAGED. */
static sm_status verdict(const struct sm_output *o, struct sm_output_decision *d,
                         struct sm_err *err)
{
    struct sm_verify_report rep;
    SM_TRY(sm_output_verify(o->root, &rep, err));
    d->found = rep.nproblems == 0 ? SM_OUTPUT_FOUND_COMPLETE : SM_OUTPUT_FOUND_DAMAGED;
    d->shards = rep.shards;
    d->bytes = rep.bytes;
    d->problems = rep.nproblems;
    if (rep.nproblems > 0) {
        snprintf(d->first_problem, sizeof(d->first_problem), "%s: %s", rep.problems[0].key,
                 rep.problems[0].what);
    }
    sm_verify_report_destroy(&rep);
    return SM_OK;
}

sm_status sm_output_decide(const struct sm_output *o, const json_t *identity,
                           struct sm_output_decision *d, struct sm_err *err)
{
    memset(d, 0, sizeof(*d));
    d->found = SM_OUTPUT_FOUND_NEW;
    if (o->opts.exists != SM_OUTPUT_EXISTS_AUTO || !json_is_object(identity)) {
        SM_FAIL(err, SM_E_INTERNAL,
                "sm_output_decide: an output opened with output.exists auto "
                "and an identity object");
    }
    if (o->state != OUT_SHARDMILL) { /* open refused a foreign one */
        return SM_OK;
    }
    const int fd = sm_output_open_root(o->root);
    if (fd < 0) {
        return SM_ERRNO(err, errno, o->root, "cannot open the output");
    }
    struct sm_buf zj = SM_BUF_INIT;
    bool found = false, marked = false;
    const char *name = sm_wfs_root_doc(fd);
    sm_status st = sm_wfs_read(fd, name, &zj, &found, err);
    struct stat sb;
    if (st == SM_OK) {
        marked = fstatat(fd, SM_MARKER_NAME, &sb, AT_SYMLINK_NOFOLLOW) == 0;
    }
    close(fd);
    d->found = SM_OUTPUT_FOUND_UNFINISHED; /* no zarr.json: nothing to keep, resume clears it */
    if (st == SM_OK && found) {
        st = same_identity(o, name, sm_buf_bytes(&zj), identity, err);
    }
    if (st == SM_OK && found && marked) {
        st = verdict(o, d, err);
    }
    sm_buf_free(&zj);
    if (st != SM_OK) {
        sm_err_where(err, "%s", o->root);
    }
    return st;
}

void sm_output_settle(struct sm_output *o, enum sm_output_found found)
{
    if (o->opts.exists != SM_OUTPUT_EXISTS_AUTO) {
        return;
    }
    o->was_auto = true;
    if (found == SM_OUTPUT_FOUND_NEW) {
        o->opts.exists = SM_OUTPUT_EXISTS_ERROR;
    } else if (found != SM_OUTPUT_FOUND_COMPLETE) {
        o->opts.exists = SM_OUTPUT_EXISTS_RESUME;
    }
}

const char *sm_output_found_action(enum sm_output_found found)
{
    switch (found) {
    case SM_OUTPUT_FOUND_NEW:
        return "written";
    case SM_OUTPUT_FOUND_UNFINISHED:
        return "resumed";
    case SM_OUTPUT_FOUND_DAMAGED:
        return "repaired";
    case SM_OUTPUT_FOUND_COMPLETE:
        return "complete";
    }
    return "written";
}

uint64_t sm_output_track_bytes(uint64_t nshards)
{
    /* this run's records, a resume's previous ones and its merge, the records gathered on rank
     * 0, the marker's text (SM_MARKER_REC_MAX a record line) and the directory flags */
    const uint64_t per =
        3 * sizeof(struct sm_shard_rec) + SM_JREC_BYTES + SM_MARKER_REC_MAX + sizeof(atomic_uchar);
    return nshards > UINT64_MAX / per ? UINT64_MAX : nshards * per;
}

/* Appends to path (dotted) the first member where a and b differ; false if they are equal. */
bool sm_output_first_diff(json_t *a, json_t *b, char *path, size_t cap)
{
    if (json_equal(a, b)) {
        return false;
    }
    if (!json_is_object(a) || !json_is_object(b)) {
        return true; /* a differing value (or type): this is the member */
    }
    const char *key;
    json_t *v;
    const size_t at = strlen(path);
    json_object_foreach(a, key, v)
    {
        snprintf(path + at, cap - at, "%s%s", at == 0 ? "" : ".", key);
        json_t *w = json_object_get(b, key);
        if (w == NULL || sm_output_first_diff(v, w, path, cap)) {
            return true;
        }
    }
    json_object_foreach(b, key, v)
    {
        if (json_object_get(a, key) == NULL) {
            snprintf(path + at, cap - at, "%s%s", at == 0 ? "" : ".", key);
            return true;
        }
    }
    path[at] = '\0';
    return true;
}
