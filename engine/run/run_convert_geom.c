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
        SM_TRY(sm_run_ome_geometry(cv->res->store, cv->p->c.input.array, NULL, m->ndim, cv->su.off,
                                   o->levels != 0, o, cv->unit, sizeof(cv->unit), err));
        mark(g, o, b, "ome-zarr");
        SM_TRY(sm_run_ome_geometry(NULL, NULL, m->attributes, m->ndim, cv->su.off, false, o,
                                   cv->unit, sizeof(cv->unit), err));
        mark(g, o, b, "shardmill");
        return SM_OK;
    }
    const struct sm_source_info *info = sm_source_info(cv->src);
    json_t *j = sm_cv_source_geometry(info);
    const sm_status st = sm_run_ome_geometry(NULL, NULL, j, m->ndim, cv->su.off, false, o, cv->unit,
                                             sizeof(cv->unit), err);
    json_decref(j);
    mark(g, o, b, info->geometry_from[0] != '\0' ? info->geometry_from : info->format);
    return st;
}

/* The input's unit as a name (an OME-Zarr "um": micrometer), or NULL: none, or one that is no
 * space unit (kept in unit_dropped). */
static const char *input_unit(const struct sm_run_ome *o, struct sm_run_geometry *g)
{
    const char *name = o->unit != NULL ? sm_unit_space_lookup(o->unit) : NULL;
    if (o->unit != NULL && name == NULL) {
        snprintf(g->unit_dropped, sizeof(g->unit_dropped), "%s", o->unit);
        g->unit_from[0] = '\0';
    }
    return name;
}

/* Every level's scale and translation a finite number (issue 32 item 11), checked before the
 * output exists: a value the configuration gave is SM_E_USAGE naming its key, one the input
 * states (a file's header, OME-XML, an OME-Zarr input's multiscales) SM_E_DATA naming the
 * input. `cfg_spacing`, `cfg_origin`: given by input.spacing, input.origin. */
static sm_status check_finite(struct cv *cv, bool cfg_spacing, bool cfg_origin, struct sm_err *err)
{
    const struct sm_run_ome *o = &cv->oo.ome;
    struct sm_run_ome_bad bad;
    if (sm_run_ome_finite(o, cv->m->ndim, cv->su.shape, &bad)) {
        return SM_OK;
    }
    const unsigned d = bad.axis;
    const char *what = bad.translation ? "translation" : "scale";
    const bool file_spacing = o->spacing.set && !cfg_spacing;
    const bool file_origin = bad.translation && o->origin.set && !cfg_origin;
    if (!file_spacing && !file_origin) {
        const bool by_origin = bad.translation && cfg_origin;
        SM_FAIL_AT(err, SM_E_USAGE, by_origin ? "input.origin" : "input.spacing",
                   "its value for axis %u (%g) makes level %u's %s on that axis %g: not a finite "
                   "number, which OME-Zarr metadata cannot hold",
                   d + 1, by_origin ? o->origin.v[d] : o->spacing.v[d], bad.level, what, bad.value);
    }
    const struct sm_run_geometry *g = &cv->res->geometry;
    const char *in = cv->p->c.input.store != NULL ? cv->p->c.input.store : "input";
    SM_FAIL_AT(err, SM_E_DATA, in,
               "the input states spacing %g%s%s (from %s) and origin %g (from %s) on axis %u: "
               "level %u's %s would be %g, not a finite number, which OME-Zarr metadata cannot "
               "hold (input.spacing and input.origin replace them)",
               o->spacing.set ? o->spacing.v[d] : 1.0, o->unit != NULL ? " " : "",
               o->unit != NULL ? o->unit : "", g->spacing_from,
               o->origin.set ? o->origin.v[d] : 0.0, g->origin_from, d + 1, bad.level, what,
               bad.value);
}

sm_status sm_cv_input_geometry(struct cv *cv, struct sm_err *err)
{
    struct sm_run_ome *o = &cv->oo.ome;
    struct sm_run_geometry *g = &cv->res->geometry;
    const unsigned nd = cv->m->ndim;
    memset(g, 0, sizeof(*g));
    const char *want = o->unit; /* the caller's (input.unit) */
    if (want != NULL && sm_unit_space_name(want) == NULL) {
        char why[SM_UNIT_REFUSAL_MAX];
        SM_FAIL_AT(err, SM_E_USAGE, "input.unit", "%s",
                   sm_unit_space_refusal(want, why, sizeof(why)));
    }
    const bool cfg_spacing = o->spacing.set, cfg_origin = o->origin.set;
    struct before b = {cfg_spacing, false, cfg_origin};
    o->unit = NULL; /* the input's unit is read even when the caller gives one */
    if (!(cfg_spacing && cfg_origin && want != NULL)) { /* all given: nothing to read */
        SM_TRY(fill(cv, o, &b, err));
    }
    const char *have = input_unit(o, g);
    o->unit = have;
    if (want != NULL) { /* the input's numbers in the caller's unit: 2 micrometer = 2000 nm */
        const double f = have != NULL ? sm_unit_space_factor(have, want) : 1.0;
        for (unsigned d = 0; d < nd && d < SM_MAX_DIMS; d++) {
            o->spacing.v[d] *= cfg_spacing ? 1.0 : f;
            o->origin.v[d] *= cfg_origin ? 1.0 : f;
        }
        o->unit = want;
        g->unit_dropped[0] = '\0';
    }
    mark(g, o, &(struct before){!cfg_spacing, want == NULL, !cfg_origin}, "config");
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
    return check_finite(cv, cfg_spacing, cfg_origin, err);
}
