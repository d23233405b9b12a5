/* Spacing, origin and unit of an OME-Zarr output from its input (SPEC §2 "Voxel spacing"): what
 * input.spacing / input.origin / input.unit leave out comes from an OME-Zarr input's multiscales
 * (rank 0 reads the group document, every rank gets the values), then from a shardmill array's
 * own provenance, or from what a source's header states (run_convert.c passes it as the same
 * `shardmill` attributes). */
#include "run_int.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/meta.h"
#include "shardmill/par.h"

struct geometry {
    uint8_t have_spacing, have_origin;
    char unit[48];
    double spacing[SM_MAX_DIMS], origin[SM_MAX_DIMS];
};

/* The dataset `leaf` of the multiscales in attrs: its scale and translation, the axes' unit. */
static void geometry_of(const json_t *attrs, const char *leaf, unsigned nd, struct geometry *g)
{
    const json_t *ome = json_object_get(attrs, "ome");
    const json_t *ms = json_array_get(json_object_get(ome != NULL ? ome : attrs, "multiscales"), 0);
    const json_t *axes = json_object_get(ms, "axes");
    const json_t *ds = json_object_get(ms, "datasets");
    for (size_t i = 0; i < json_array_size(ds); i++) {
        const json_t *d = json_array_get(ds, i);
        const char *path = json_string_value(json_object_get(d, "path"));
        if (path == NULL || strcmp(path, leaf) != 0) {
            continue;
        }
        const json_t *ct = json_object_get(d, "coordinateTransformations");
        for (size_t j = 0; j < json_array_size(ct); j++) {
            const json_t *t = json_array_get(ct, j);
            const char *type = json_string_value(json_object_get(t, "type"));
            const bool sc = type != NULL && strcmp(type, "scale") == 0;
            const bool tr = type != NULL && strcmp(type, "translation") == 0;
            const json_t *v = json_object_get(t, sc ? "scale" : "translation");
            if ((!sc && !tr) || json_array_size(v) != nd) {
                continue;
            }
            double *dst = sc ? g->spacing : g->origin;
            bool ok = true;
            for (unsigned k = 0; k < nd; k++) {
                ok = ok && json_is_number(json_array_get(v, k));
                dst[k] = json_number_value(json_array_get(v, k));
                ok = ok && (!sc || dst[k] > 0);
            }
            if (sc) {
                g->have_spacing = ok;
            } else {
                g->have_origin = ok;
            }
        }
    }
    if (json_array_size(axes) == nd) {
        const char *u = json_string_value(json_object_get(json_array_get(axes, nd - 1), "unit"));
        if (u != NULL && strlen(u) < sizeof(g->unit)) {
            snprintf(g->unit, sizeof(g->unit), "%s", u);
        }
    }
}

/* Rank 0 reads the multiscales of the group holding input.array (one metadata request: zarr.json,
 * else .zattrs) and broadcasts the level's spacing, origin and unit. */
static sm_status read_geometry(struct sm_store *store, const char *array, unsigned nd,
                               struct geometry *g, struct sm_err *err)
{
    memset(g, 0, sizeof(*g));
    sm_status st = SM_OK;
    if (sm_par_rank() == 0 && array != NULL && array[0] != '\0') {
        char parent[512];
        snprintf(parent, sizeof(parent), "%s", array);
        size_t n = strlen(parent);
        while (n > 0 && parent[n - 1] == '/') {
            parent[--n] = '\0';
        }
        char *slash = strrchr(parent, '/');
        const char *leaf = slash != NULL ? slash + 1 : parent;
        char key[600];
        const char *docs[2] = {"zarr.json", ".zattrs"};
        for (int k = 0; k < 2 && st == SM_OK && !g->have_spacing; k++) {
            if (slash != NULL) {
                *slash = '\0';
                snprintf(key, sizeof(key), "%s/%s", parent, docs[k]);
                *slash = '/';
            } else {
                snprintf(key, sizeof(key), "%s", docs[k]);
            }
            struct sm_buf b = SM_BUF_INIT;
            bool found = false;
            st = sm_store_get(store, key, sm_range_all(), SM_IO_META, &b, &found, err);
            json_t *doc = NULL;
            if (st == SM_OK && found) { /* a document that does not parse is an error (meta.h) */
                char where[1200];
                snprintf(where, sizeof(where), "%s/%s", store->url, key);
                st = sm_json_load((const char *)b.ptr, b.len, where, &doc, err);
            }
            if (doc != NULL) {
                const json_t *attrs = k == 0 ? json_object_get(doc, "attributes") : doc;
                geometry_of(attrs, leaf, nd, g);
                json_decref(doc);
            }
            sm_buf_free(&b);
        }
    }
    st = sm_par_agree(st, err);
    if (st == SM_OK) {
        st = sm_par_bcast(g, sizeof(*g), 0, err);
    }
    return st;
}

sm_status sm_run_ome_geometry(struct sm_store *store, const char *array, const json_t *input_attrs,
                              unsigned nd, const uint64_t *roi_off, bool read,
                              struct sm_run_ome *ome, char *unit_buf, size_t unit_cap,
                              struct sm_err *err)
{
    if (ome->spacing.set && ome->spacing.n != nd) {
        SM_FAIL_AT(err, SM_E_USAGE, "input.spacing", "has %u values, the input has %u axes",
                   ome->spacing.n, nd);
    }
    if (ome->origin.set && ome->origin.n != nd) {
        SM_FAIL_AT(err, SM_E_USAGE, "input.origin", "has %u values, the input has %u axes",
                   ome->origin.n, nd);
    }
    if (ome->spacing.set && ome->origin.set && ome->unit != NULL) {
        return SM_OK; /* all given: nothing to read */
    }
    struct geometry g; /* an OME-Zarr input's group is read only for an OME-Zarr output */
    memset(&g, 0, sizeof(g));
    if (read) {
        SM_TRY(read_geometry(store, array, nd, &g, err));
    }
    const json_t *pv = json_object_get(input_attrs, "shardmill"); /* a shardmill array's own */
    const json_t *psp = json_object_get(pv, "spacing"), *porg = json_object_get(pv, "origin");
    if (!g.have_spacing && json_array_size(psp) == nd) {
        g.have_spacing = 1;
        for (unsigned d = 0; d < nd; d++) {
            g.spacing[d] = json_number_value(json_array_get(psp, d));
            g.have_spacing = g.have_spacing && g.spacing[d] > 0;
        }
        const char *u = json_string_value(json_object_get(pv, "unit"));
        if (g.unit[0] == '\0' && u != NULL && strlen(u) < sizeof(g.unit)) {
            snprintf(g.unit, sizeof(g.unit), "%s", u);
        }
    }
    if (!g.have_origin && json_array_size(porg) == nd) {
        g.have_origin = 1;
        for (unsigned d = 0; d < nd; d++) {
            g.origin[d] = json_number_value(json_array_get(porg, d));
        }
    }
    if (!ome->spacing.set && g.have_spacing) {
        ome->spacing.set = true;
        ome->spacing.n = nd;
        memcpy(ome->spacing.v, g.spacing, sizeof(g.spacing));
    }
    if (!ome->origin.set && g.have_origin) { /* the ROI's first voxel */
        ome->origin.set = true;
        ome->origin.n = nd;
        for (unsigned d = 0; d < nd; d++) {
            const double sp = ome->spacing.set ? ome->spacing.v[d] : 1.0;
            ome->origin.v[d] = g.origin[d] + (double)roi_off[d] * sp;
        }
    }
    if (ome->unit == NULL && g.unit[0] != '\0') {
        snprintf(unit_buf, unit_cap, "%s", g.unit);
        ome->unit = unit_buf;
    }
    return SM_OK;
}
