/* Command-line parsing driven by per-command option tables: the same table gives parsing, type
 * and range checks and the --help text, so they cannot drift apart. */
#include <shardmill/sm_config.h>

#include "jobs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool parse_u64(const char *s, uint64_t *out, char **end)
{
    if (*s < '0' || *s > '9') {
        return false;
    }
    errno = 0;
    unsigned long long v = strtoull(s, end, 10);
    if (errno != 0) {
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

bool sm_parse_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *suffix;
        unsigned shift;
    } units[] = {{"", 0}, {"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
    char *end;
    uint64_t v;
    if (!parse_u64(s, &v, &end)) {
        return false;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            if (units[i].shift != 0 && v > (UINT64_MAX >> units[i].shift)) {
                return false;
            }
            *out = v << units[i].shift;
            return true;
        }
    }
    return false;
}

bool sm_parse_u64_list(const char *s, struct sm_u64_list *out)
{
    out->n = 0;
    for (;;) {
        char *end;
        if (out->n == SM_LIST_MAX || !parse_u64(s, &out->v[out->n], &end)) {
            return false;
        }
        out->n++;
        if (*end == '\0') {
            out->set = true;
            return true;
        }
        if (*end != ',') {
            return false;
        }
        s = end + 1;
    }
}

static void print_help(const struct sm_cmd_spec *spec)
{
    printf("usage: shardmill %s %s\n\n%s\n\noptions:\n", spec->name, spec->usage, spec->about);
    for (const struct sm_opt *o = spec->opts; o->name != NULL; o++) {
        char lhs[64];
        if (o->short_name != 0) {
            snprintf(lhs, sizeof(lhs), "-%c, --%s%s%s", o->short_name, o->name,
                     o->arg != NULL ? " " : "", o->arg != NULL ? o->arg : "");
        } else {
            snprintf(lhs, sizeof(lhs), "    --%s%s%s", o->name, o->arg != NULL ? " " : "",
                     o->arg != NULL ? o->arg : "");
        }
        printf("  %-32s %s\n", lhs, o->help);
    }
    printf("  %-32s %s\n", "-h, --help", "show this help and exit");
    printf("  %-32s %s\n", "--", "end of options: what follows is positional (a name such as -x)");
}

static const struct sm_opt *find_opt(const struct sm_cmd_spec *spec, const char *arg)
{
    for (const struct sm_opt *o = spec->opts; o->name != NULL; o++) {
        if (arg[1] == '-' ? strcmp(arg + 2, o->name) == 0
                          : (o->short_name != 0 && arg[1] == o->short_name && arg[2] == '\0')) {
            return o;
        }
    }
    return NULL;
}

static int set_opt(const struct sm_cmd_spec *spec, const struct sm_opt *o, const char *val)
{
    switch (o->kind) {
    case SM_OPT_FLAG:
        *(bool *)o->dst = true;
        return -1;
    case SM_OPT_STRING:
        *(const char **)o->dst = val;
        return -1;
    case SM_OPT_U64: {
        char *end;
        if (!parse_u64(val, (uint64_t *)o->dst, &end) || *end != '\0') {
            return sm_usage_error(spec->name, "--%s: '%s' is not a non-negative integer", o->name,
                                  val);
        }
        return -1;
    }
    case SM_OPT_SIZE:
        if (!sm_parse_size(val, (uint64_t *)o->dst)) {
            return sm_usage_error(
                spec->name, "--%s: '%s' is not a size (bytes, or with KiB/MiB/GiB)", o->name, val);
        }
        return -1;
    case SM_OPT_LIST:
        if (!sm_parse_u64_list(val, (struct sm_u64_list *)o->dst)) {
            return sm_usage_error(
                spec->name, "--%s: '%s' is not a comma-separated list of integers", o->name, val);
        }
        return -1;
    case SM_OPT_STRINGS: {
        struct sm_str_list *l = (struct sm_str_list *)o->dst;
        if (l->n == SM_STR_LIST_MAX) {
            return sm_usage_error(spec->name, "--%s: at most %d values", o->name, SM_STR_LIST_MAX);
        }
        l->v[l->n++] = val;
        return -1;
    }
    }
    return -1;
}

int sm_cli_parse(const struct sm_cmd_spec *spec, int argc, char **argv, const char **pos,
                 unsigned *npos)
{
    *npos = 0;
    /* every option that takes a string says whether it names a path, and of which class
     * (issue 32): the output rule cannot miss a new one (the option tables are checked by
     * running every command's --help, tests/unit/jobs) */
    for (const struct sm_opt *o = spec->opts; o->name != NULL; o++) {
        if ((o->kind == SM_OPT_STRING || o->kind == SM_OPT_STRINGS) &&
            o->path_class == SM_PATHC_UNSET) {
            fprintf(stderr,
                    "shardmill: error: %s: internal: option --%s declares no path class "
                    "(jobs/config.h enum sm_path_class)\n",
                    spec->name, o->name);
            return 1;
        }
    }
    bool options = true; /* until "--": what follows it is positional, even "-x" */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options && strcmp(a, "--") == 0) {
            options = false;
            continue;
        }
        if (options && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
            print_help(spec);
            return 0;
        }
        if (!options || a[0] != '-' || strcmp(a, "-") == 0) {
            if (*npos == spec->max_pos) {
                return sm_usage_error(spec->name, "unexpected argument '%s' (see --help)", a);
            }
            pos[(*npos)++] = a;
            continue;
        }
        char name[64];
        const char *val = NULL;
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        if (eq != NULL) { /* --name=value */
            snprintf(name, sizeof(name), "%.*s", (int)(eq - a), a);
            val = eq + 1;
            a = name;
        }
        const struct sm_opt *o = find_opt(spec, a);
        if (o == NULL) {
            return sm_usage_error(spec->name, "unknown option '%s' (see --help)", argv[i]);
        }
        if (o->kind == SM_OPT_FLAG && val != NULL) {
            return sm_usage_error(spec->name, "option '%s' takes no value", a);
        }
        if (o->kind != SM_OPT_FLAG && val == NULL) {
            if (i + 1 >= argc) {
                return sm_usage_error(spec->name, "option '%s' needs a value", a);
            }
            val = argv[++i];
        }
        int rc = set_opt(spec, o, val);
        if (rc >= 0) {
            return rc;
        }
    }
    if (*npos < spec->min_pos) {
        return sm_usage_error(spec->name, "missing argument (usage: shardmill %s %s)", spec->name,
                              spec->usage);
    }
    return -1;
}
