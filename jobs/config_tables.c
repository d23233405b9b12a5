/* The schema's view of the engine's registries (issue 36): the names, help and rules of the
 * sources (shardmill/source.h sm_source_formats), the writable codecs (shardmill/codec.h writer
 * slots) and the normalization modes (shardmill/stats.h sm_norm_modes), and which keys a row's
 * source or mode uses (sm_cfg_used). jobs/ writes no list of them anywhere else; the arch test
 * tests/arch/test_name_lists.py checks it. */
#include <shardmill/sm_config.h>

#include "config_schema.h"

#include <shardmill/codec.h>
#include <shardmill/source.h>
#include <shardmill/stats.h>
#include <stdio.h>
#include <string.h>

/* The array formats of input.format, read by array/ (not sources): told apart by metadata. */
#define ARRAY_FORMATS "zarr|n5"

/* A built text, kept for the process (NULL when out of memory: the row's own text is used). */
struct text {
    bool built;
    struct sm_cfg_sb sb;
};

#define put(t, ...) sm_cfg_sb_printf(&(t)->sb, __VA_ARGS__)

/* "i-th of count" separators of a list in prose: "", ", ", then " and "/" or " before the last. */
static const char *sep(unsigned i, unsigned count, const char *last)
{
    return i == 0 ? "" : i + 1 == count ? last : ", ";
}

/* The first source, ingest's default when the file's name infers none. */
static const char *first_source(void)
{
    const char *name = sm_source_formats[0].name;
    return name != NULL ? name : "";
}

static unsigned nsources(void)
{
    unsigned n = 0;
    while (sm_source_formats[n].name != NULL) {
        n++;
    }
    return n;
}

/* The writable codecs, in registry order. */
static const struct sm_codec_ops *writable(unsigned i)
{
    for (size_t k = 0; sm_codec_at(k) != NULL; k++) {
        if (sm_codec_at(k)->writer != NULL && i-- == 0) {
            return sm_codec_at(k);
        }
    }
    return NULL;
}

/* " " + the modes whose descriptor reads key, joined: "window and percentile". */
static void modes_of_key(struct text *t, const char *key)
{
    unsigned n = 0, count = 0;
    for (unsigned m = 0; m < SM_NORM_NMODES; m++) {
        count += strstr(sm_norm_modes[m].keys, key) != NULL;
    }
    for (unsigned m = 0; m < SM_NORM_NMODES; m++) {
        if (strstr(sm_norm_modes[m].keys, key) != NULL) {
            put(t, "%s%s", sep(n++, count, " and "), sm_norm_modes[m].name);
        }
    }
}

const char *sm_cfg_choices(const struct sm_cfg_key *k)
{
    static struct text t[SM_CFG_FROM_MODE + 1];
    if (k->from != SM_CFG_FROM_FORMAT && k->from != SM_CFG_FROM_CODEC &&
        k->from != SM_CFG_FROM_MODE) {
        return k->choices;
    }
    struct text *x = &t[k->from];
    if (!x->built) {
        x->built = true;
        if (k->from == SM_CFG_FROM_FORMAT) {
            put(x, "%s", ARRAY_FORMATS);
            for (const struct sm_source_format *f = sm_source_formats; f->name != NULL; f++) {
                put(x, "|%s", f->name);
            }
        } else if (k->from == SM_CFG_FROM_CODEC) {
            for (unsigned i = 0; writable(i) != NULL; i++) {
                put(x, "%s|", sm_codec_choice(writable(i)));
            }
            put(x, "none");
        } else {
            for (unsigned m = 0; m < SM_NORM_NMODES; m++) {
                put(x, "%s%s", m == 0 ? "" : "|", sm_norm_modes[m].name);
            }
        }
    }
    return x->sb.p != NULL ? x->sb.p : "";
}

static void format_help(struct text *x)
{
    const unsigned n = nsources();
    put(x, "what input.store holds (");
    for (unsigned i = 0; i < n; i++) {
        put(x, "%s%s", sep(i, n, " and "), sm_source_formats[i].name);
    }
    put(x, " are read by convert and ingest; scan and read-bench read zarr or n5");
    for (const struct sm_source_format *f = sm_source_formats; f->name != NULL; f++) {
        put(x, "; %s: %s", f->name, f->doc);
    }
    put(x, "; zarr and n5 are told apart by the store's metadata, so either reads both)");
}

const char *sm_cfg_help(const struct sm_cfg_key *k)
{
    static struct text t[SM_CFG_FROM_MODE + 1];
    if (k->from != SM_CFG_FROM_FORMAT && k->from != SM_CFG_FROM_CODEC &&
        k->from != SM_CFG_FROM_LEVEL && k->from != SM_CFG_FROM_MODE) {
        return k->help;
    }
    struct text *x = &t[k->from];
    if (x->built) {
        return x->sb.p != NULL ? x->sb.p : "";
    }
    x->built = true;
    if (k->from == SM_CFG_FROM_FORMAT) {
        format_help(x);
    } else if (k->from == SM_CFG_FROM_CODEC) {
        put(x, "compression of the (inner) chunks");
        for (unsigned i = 0; writable(i) != NULL; i++) {
            put(x, "%s%s: %s", i == 0 ? " (" : "; ", sm_codec_choice(writable(i)),
                writable(i)->writer->doc);
        }
        put(x, "; none: stored as they are)");
    } else if (k->from == SM_CFG_FROM_LEVEL) {
        put(x, "compression level: ");
        for (unsigned i = 0; writable(i) != NULL; i++) {
            char r[48];
            snprintf(r, sizeof(r), "%d..%d", writable(i)->writer->level_min,
                     writable(i)->writer->level_max);
            put(x, i == 0 ? "%s %s" : ", %s %s", sm_codec_choice(writable(i)), r);
        }
        put(x, " (none ignores it)");
    } else {
        for (unsigned m = 0; m < SM_NORM_NMODES; m++) {
            put(x, m == 0 ? "%s: %s" : "; %s: %s", sm_norm_modes[m].name, sm_norm_modes[m].doc);
        }
    }
    return x->sb.p != NULL ? x->sb.p : "";
}

const char *sm_cfg_def_doc(const struct sm_cfg_key *k)
{
    static struct text fmt, lo, hi;
    if (k->from == SM_CFG_FROM_FORMAT && !fmt.built) {
        fmt.built = true;
        put(&fmt, "convert and ingest: ");
        for (const struct sm_source_format *f = sm_source_formats; f->name != NULL; f++) {
            unsigned n = 0, count = 0;
            for (const char *e = f->extensions; *e != '\0';
                 e += strcspn(e, "|") + (e[strcspn(e, "|")] == '|')) {
                count++;
            }
            if (count == 0) {
                continue;
            }
            put(&fmt, "%s for a ", f->name);
            for (const char *e = f->extensions; *e != '\0';) {
                const size_t len = strcspn(e, "|");
                char ext[32];
                snprintf(ext, sizeof(ext), "%.*s", (int)len, e);
                put(&fmt, "%s%s", sep(n++, count, " or "), ext);
                e += len + (e[len] == '|');
            }
            put(&fmt, " file, ");
        }
        put(&fmt, "else zarr (convert) or %s (ingest); scan and read-bench: zarr", first_source());
    }
    if (k->from == SM_CFG_FROM_FORMAT) {
        return fmt.sb.p;
    }
    if (k->from == SM_CFG_FROM_MODE_KEY) {
        struct text *x = strcmp(k->path, "normalize.lo") == 0 ? &lo : &hi;
        if (!x->built) {
            x->built = true;
            put(x, "required by ");
            modes_of_key(x, k->path);
        }
        return x->sb.p != NULL ? x->sb.p : "";
    }
    return k->def_doc;
}

/* "`a`/`b`" of a "|"-list of extensions. */
static void ext_list(struct text *x, const char *exts)
{
    for (const char *e = exts; *e != '\0';) {
        const size_t len = strcspn(e, "|");
        char one[32];
        snprintf(one, sizeof(one), "%.*s", (int)len, e);
        put(x, "%s`%s`", e == exts ? "" : "/", one);
        e += len + (e[len] == '|');
    }
}

static void rules_sources(struct text *x)
{
    const unsigned n = nsources();
    put(x,
        "| `job` | `input.format` is `zarr` or `n5` for scan and read-bench; convert and ingest "
        "read those and every source: %s",
        "");
    for (unsigned i = 0; i < n; i++) {
        put(x, "%s`%s`", sep(i, n, " or "), sm_source_formats[i].name);
    }
    put(x, " (default: ");
    for (const struct sm_source_format *f = sm_source_formats; f->name != NULL; f++) {
        if (f->extensions[0] != '\0') {
            put(x, "`%s` for a ", f->name);
            ext_list(x, f->extensions);
            put(x, " file, ");
        }
    }
    put(x, "else `zarr` for convert and `%s` for ingest) |\n", first_source());
    for (const struct sm_source_format *f = sm_source_formats; f->name != NULL; f++) {
        if (f->required[0] != '\0') {
            put(x, "| `input.format: %s` | ", f->name);
            for (const char *e = f->required; *e != '\0';) {
                const size_t len = strcspn(e, "|");
                char one[64];
                snprintf(one, sizeof(one), "%.*s", (int)len, e);
                put(x, "%s`%s`", e == f->required ? "" : " and ", one);
                e += len + (e[len] == '|');
            }
            put(x, " %s required |\n", strchr(f->required, '|') != NULL ? "are" : "is");
        }
        if (f->ndim != 0) {
            char nd[16];
            snprintf(nd, sizeof(nd), "%u", f->ndim);
            put(x,
                "| `input.format: %s` | the volume has %s axes: every shape key, "
                "`input.spacing` and `input.origin` has that many values |\n",
                f->name, nd);
        }
    }
    put(x, "| `input.<format>.*` | read only with that `input.format` (");
    unsigned own = 0;
    for (const struct sm_source_format *f = sm_source_formats; f->name != NULL; f++) {
        char prefix[48];
        snprintf(prefix, sizeof(prefix), "input.%s.", f->name);
        if (sm_cfg_is_group(prefix) || strstr(f->required, prefix) != NULL) {
            put(x, "%s`input.%s.*`", own++ == 0 ? "" : ", ", f->name);
        }
    }
    put(x, "): given otherwise they are refused, never ignored |\n");
}

const char *sm_cfg_registry_rules(void)
{
    static struct text x;
    if (x.built) {
        return x.sb.p != NULL ? x.sb.p : "";
    }
    x.built = true;
    rules_sources(&x);
    put(&x, "| `normalize.mode`, `normalize.lo`, `normalize.hi` | ");
    unsigned n = 0, count = 0;
    for (unsigned m = 0; m < SM_NORM_NMODES; m++) {
        count += strstr(sm_norm_modes[m].keys, "normalize.lo") != NULL;
    }
    for (unsigned m = 0; m < SM_NORM_NMODES; m++) {
        if (strstr(sm_norm_modes[m].keys, "normalize.lo") != NULL) {
            put(&x, "%s`%s`", sep(n++, count, " and "), sm_norm_modes[m].name);
        }
    }
    put(&x, " need both, with lo < hi; ");
    for (unsigned m = 0; m < SM_NORM_NMODES; m++) {
        if (sm_norm_modes[m].window == SM_NORM_WIN_PERCENTILE) {
            put(&x, "`%s` values are within 0..100 |\n", sm_norm_modes[m].name);
        }
    }
    put(&x, "| `output.codec.name`, `output.codec.level` | levels: ");
    for (unsigned i = 0; writable(i) != NULL; i++) {
        char r[48];
        snprintf(r, sizeof(r), "%d..%d", writable(i)->writer->level_min,
                 writable(i)->writer->level_max);
        put(&x, i == 0 ? "%s %s" : ", %s %s", sm_codec_choice(writable(i)), r);
    }
    put(&x, " |\n");
    return x.sb.p != NULL ? x.sb.p : "";
}

bool sm_cfg_used(const struct sm_cfg_key *k, const struct sm_job_config *c)
{
    if ((k->applies & SM_CFG_JOB(c->job)) == 0) {
        return false;
    }
    /* input.<source>.*: the keys of one source; of an s3:// store; of an export (issue 32 #18) */
    const char *fmt = c->input.format; /* NULL until the loader settles it: not yet known */
    for (const struct sm_source_format *f = sm_source_formats; f->name != NULL; f++) {
        const size_t n = strlen(f->name);
        if (strncmp(k->path, "input.", 6) == 0 && strncmp(k->path + 6, f->name, n) == 0 &&
            k->path[6 + n] == '.') {
            return fmt == NULL || strcmp(fmt, f->name) == 0;
        }
    }
    if (strncmp(k->path, "input.s3.", 9) == 0) {
        return c->input.store == NULL || strncmp(c->input.store, "s3://", 5) == 0;
    }
    if (strncmp(k->path, "export.hdf5.", 12) == 0 && strcmp(k->path, "export.hdf5.path") != 0) {
        return c->export_.hdf5_path != NULL;
    }
    if (strncmp(k->path, "normalize.", 10) == 0 && strcmp(k->path, "normalize.mode") != 0) {
        return strstr(sm_norm_desc(c->normalize.mode)->keys, k->path) != NULL; /* one mode's */
    }
    return true;
}
