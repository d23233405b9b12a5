/* The geometry of a convert's output (SPEC §2 "OME-Zarr output"): what output.ome lacks filled
 * from the input, its unit a UDUNITS-2 name, and the result saying where each part came from
 * (pipeline.h `struct sm_run_geometry`, the report's input.geometry_from). */
#include "run_convert_int.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/unit.h"

struct before {
    bool spacing, unit, origin;
};

/* Names the parts that became set since `b` as coming from `from`. */
static void mark(struct sm_run_geometry *g, const struct sm_run_ome *o, struct before *b,
                 const char *from)
{
    if (!b->spacing && o->spacing.set) {
        snprintf(g->spacing_from, sizeof(g->spacing_from), "%s", from);
        b->spacing = true;
    }
    if (!b->unit && o->unit != NULL) {
        snprintf(g->unit_from, sizeof(g->unit_from), "%s", from);
        b->unit = true;
    }
    if (!b->origin && o->origin.set) {
        snprintf(g->origin_from, sizeof(g->origin_from), "%s", from);
        b->origin = true;
    }
}

/* Fills o from the input, marking what came from where. */
static sm_status fill(struct cv *cv, struct sm_run_ome *o, struct before *b, struct sm_err *err)
{
    const struct sm_array_meta *m = cv->m;
    struct sm_run_geometry *g = &cv->res->geometry;
    if (cv->src == NULL) { /* an OME-Zarr group is read only for an OME-Zarr output */
        SM_TRY(run_ome_geometry(cv->res->store, cv->p->c.input.array, NULL, m->ndim, cv->su.off,
                                o->levels != 0, o, cv->unit, sizeof(cv->unit), err));
        mark(g, o, b, "ome-zarr");
        SM_TRY(run_ome_geometry(NULL, NULL, m->attributes, m->ndim, cv->su.off, false, o, cv->unit,
                                sizeof(cv->unit), err));
        mark(g, o, b, "shardmill");
        return SM_OK;
    }
    const struct sm_source_info *info = sm_source_info(cv->src);
    json_t *j = cv_source_geometry(info);
    const sm_status st = run_ome_geometry(NULL, NULL, j, m->ndim, cv->su.off, false, o, cv->unit,
                                          sizeof(cv->unit), err);
    json_decref(j);
    mark(g, o, b, info->geometry_from[0] != '\0' ? info->geometry_from : info->format);
    return st;
}

sm_status cv_input_geometry(struct cv *cv, struct sm_err *err)
{
    struct sm_run_ome *o = &cv->oo.ome;
    struct sm_run_geometry *g = &cv->res->geometry;
    const unsigned nd = cv->m->ndim;
    memset(g, 0, sizeof(*g));
    if (o->unit != NULL && sm_unit_space_name(o->unit) == NULL) {
        char why[SM_UNIT_REFUSAL_MAX];
        FAIL_USAGE(err, "input.unit", "%s", sm_unit_space_refusal(o->unit, why, sizeof(why)));
    }
    struct before b = {o->spacing.set, o->unit != NULL, o->origin.set};
    mark(g, o, &(struct before){false, false, false}, "config");
    SM_TRY(fill(cv, o, &b, err));
    if (o->unit != NULL && strcmp(g->unit_from, "config") != 0) {
        const char *name = sm_unit_space_lookup(o->unit); /* an input's "um": micrometer */
        if (name == NULL) {
            snprintf(g->unit_dropped, sizeof(g->unit_dropped), "%s", o->unit);
            g->unit_from[0] = '\0';
        }
        o->unit = name;
    }
    char *from[3] = {g->spacing_from, g->unit_from, g->origin_from};
    for (int i = 0; i < 3; i++) {
        if (from[i][0] == '\0') {
            snprintf(from[i], sizeof(g->spacing_from), "%s", "default");
        }
    }
    for (unsigned d = 0; d < nd && d < SM_MAX_DIMS; d++) {
        g->spacing[d] = o->spacing.set ? o->spacing.v[d] : 1.0;
        g->origin[d] = o->origin.set ? o->origin.v[d] : 0.0;
    }
    g->origin_set = o->origin.set;
    snprintf(g->unit, sizeof(g->unit), "%s", o->unit != NULL ? o->unit : "");
    return SM_OK;
}
