/* docs/CONFIG.md, rendered from the schema table (SPEC §4, STYLE B10): `shardmill validate
 * --markdown`. The syntax, two example pipelines, every rule between keys that the loader checks
 * (config_rules.c), a table of the keys and one section per group with each key's type, default,
 * required-by and jobs, and an example in YAML and --set form. ctest unit.jobs.config_doc_matches
 * fails when docs/CONFIG.md and this output differ. */
#include <shardmill/sm_config.h>

#include "config_schema.h"

#include <stdbool.h>
#include <string.h>

#include <shardmill/unit.h>

static unsigned count_dots(const char *s)
{
    unsigned n = 0;
    for (; *s != '\0'; s++) {
        n += *s == '.';
    }
    return n;
}

static void md_type_only(struct sm_cfg_sb *sb, const struct sm_cfg_key *k)
{
    switch (k->type) {
    case SM_CFG_BOOL:
        sm_cfg_sb_printf(sb, "bool (`true` or `false`)");
        return;
    case SM_CFG_UINT:
    case SM_CFG_INT:
    case SM_CFG_SIZE:
        if ((k->flags & SM_CFGF_AUTO) != 0) {
            sm_cfg_sb_printf(sb, "`auto` or an integer, ");
        } else {
            sm_cfg_sb_printf(sb, "%s, ",
                             k->type == SM_CFG_SIZE
                                 ? "size (bytes, or a number with KiB, MiB, GiB or TiB)"
                                 : "integer");
        }
        sm_cfg_format_range(sb, k);
        return;
    case SM_CFG_FLOAT:
        sm_cfg_sb_printf(sb, "number (finite%s)",
                         (k->flags & SM_CFGF_NONZERO) != 0 ? ", not 0" : "");
        return;
    case SM_CFG_STRING:
        if ((k->flags & SM_CFGF_SPACE_UNIT) != 0) {
            char names[SM_UNIT_NAMES_MAX];
            sm_cfg_sb_printf(sb, "one of the UDUNITS-2 space units OME-NGFF 0.5 lists: %s",
                             sm_unit_space_names(names, sizeof(names)));
            return;
        }
        sm_cfg_sb_printf(sb, "string%s", (k->flags & SM_CFGF_NONEMPTY) != 0 ? " (not empty)" : "");
        return;
    case SM_CFG_ENUM:
    case SM_CFG_NAME: {
        sm_cfg_sb_printf(sb, "one of ");
        const char *const choices = sm_cfg_choices(k);
        const char *s = choices;
        while (s != NULL) {
            const char *e = strchr(s, '|');
            size_t n = e != NULL ? (size_t)(e - s) : strlen(s);
            sm_cfg_sb_printf(sb, "%s`%.*s`", s == choices ? "" : ", ", (int)n, s);
            s = e != NULL ? e + 1 : NULL;
        }
        return;
    }
    case SM_CFG_DIMS:
        sm_cfg_sb_printf(sb, "%slist of %s integers (at most %d)%s",
                         (k->flags & SM_CFGF_AUTO) != 0 ? "`auto` or a " : "",
                         (k->flags & SM_CFGF_POSITIVE) != 0 ? "positive" : "non-negative",
                         SM_CFG_MAX_DIMS,
                         (k->flags & SM_CFGF_NONEMPTY) != 0 ? ", not empty" : ", may be empty");
        return;
    case SM_CFG_RANGE:
        sm_cfg_sb_printf(sb, "pair `[lo, hi]` of finite numbers, lo < hi");
        return;
    case SM_CFG_FLOATS:
        sm_cfg_sb_printf(sb, "list of %s numbers (at most %d)",
                         (k->flags & SM_CFGF_POSITIVE) != 0 ? "positive" : "finite",
                         SM_CFG_MAX_DIMS);
        return;
    }
}

static void md_type(struct sm_cfg_sb *sb, const struct sm_cfg_key *k)
{
    md_type_only(sb, k);
    if ((k->flags & SM_CFGF_NULLABLE) != 0) {
        sm_cfg_sb_printf(sb, "; or `null`");
    }
}

/* `def` (def_doc), or def_doc alone for a key without a default value, or "none". */
static void md_default(struct sm_cfg_sb *sb, const struct sm_cfg_key *k, bool brief)
{
    if (k->def != NULL) {
        sm_cfg_sb_printf(sb, "`%s`", k->def);
        if (sm_cfg_def_doc(k) != NULL && !brief) {
            sm_cfg_sb_printf(sb, " (%s)", sm_cfg_def_doc(k));
        }
    } else if (sm_cfg_def_doc(k) != NULL) {
        sm_cfg_sb_printf(sb, "%s", sm_cfg_def_doc(k));
    } else {
        sm_cfg_sb_printf(sb, "none");
    }
}

/* "every job", or "`convert` and `ingest`": the jobs of a mask. */
static void md_jobs(struct sm_cfg_sb *sb, unsigned jobs)
{
    if (jobs == SM_CFG_ALL_JOBS) {
        sm_cfg_sb_printf(sb, "every job");
        return;
    }
    unsigned left = 0;
    for (int j = SM_JOB_SCAN; j <= SM_JOB_READ_BENCH; j++) {
        left += (jobs & SM_CFG_JOB(j)) != 0;
    }
    const char *sep = "";
    for (int j = SM_JOB_SCAN; j <= SM_JOB_READ_BENCH; j++) {
        if ((jobs & SM_CFG_JOB(j)) != 0) {
            left--;
            sm_cfg_sb_printf(sb, "%s`%s`", sep, sm_config_job_name((enum sm_job_kind)j));
            sep = left == 1 ? " and " : ", ";
        }
    }
}

static void md_required(struct sm_cfg_sb *sb, const struct sm_cfg_key *k)
{
    sm_cfg_sb_printf(sb, "by ");
    md_jobs(sb, k->required);
}

/* `a: {b: {c: V}}` for path a.b.c and example V. */
static void md_example(struct sm_cfg_sb *sb, const struct sm_cfg_key *k)
{
    unsigned depth = count_dots(k->path);
    const char *s = k->path;
    sm_cfg_sb_printf(sb, "`");
    for (unsigned g = 0; g <= depth; g++) {
        const char *dot = strchr(s, '.');
        size_t n = dot != NULL ? (size_t)(dot - s) : strlen(s);
        sm_cfg_sb_printf(sb, "%.*s: %s", (int)n, s, g < depth ? "{" : "");
        s = dot != NULL ? dot + 1 : s;
    }
    sm_cfg_sb_printf(sb, "%s", k->example);
    for (unsigned g = 0; g < depth; g++) {
        sm_cfg_sb_printf(sb, "}");
    }
    bool quote = strpbrk(k->example, " []\"'{}") != NULL;
    sm_cfg_sb_printf(sb, "` or `--set %s%s=%s%s`", quote ? "'" : "", k->path, k->example,
                     quote ? "'" : "");
}

static const char md_head[] =
    "# Configuration reference\n"
    "\n"
    "<!-- Generated by `shardmill validate --markdown` from the schema table in\n"
    "     jobs/config_schema.c. Do not edit: ctest unit.jobs.config_doc_matches fails when this\n"
    "     file and the table differ. Regenerate with\n"
    "     `build/jobs/shardmill validate --markdown > docs/CONFIG.md`. -->\n"
    "\n"
    "A job is one YAML file (SPEC §4): `shardmill run CONFIG.yaml [--set key.path=value]...`.\n"
    "`shardmill validate CONFIG.yaml [--set key.path=value]...` checks a file without opening any\n"
    "store and prints `CONFIG.yaml: ok (job NAME)`, then the effective configuration (every key\n"
    "the job uses, defaults included) as YAML that loads back to the same values. Examples are in\n"
    "`configs/` (`configs/scan-s3.yaml` reads an array from an S3 bucket: `input.store:\n"
    "s3://bucket/prefix` with `input.s3.*`, credentials from the AWS environment variables or\n"
    "profile).\n"
    "\n"
    "## Syntax\n"
    "\n"
    "- Keys nest as YAML mappings, in block or flow style: `input: {cache: {max_bytes: 1GiB}}` is "
    "the\n"
    "  same as the block form. A dotted key (`input.cache.max_bytes: 1GiB`) names the same key.\n"
    "- Sizes are a byte count or a number with `KiB`, `MiB`, `GiB` or `TiB` (binary: 1KiB = "
    "1024).\n"
    "- Booleans are `true` or `false`. Numbers are decimal; `inf` and `nan` are refused.\n"
    "- `null`, `~` or an empty value unsets a key whose default is \"none\".\n"
    "- `--set key.path=value` (repeatable) applies after the file, in order. The value is parsed "
    "as a\n"
    "  YAML scalar or flow node by the same rules: `--set 'tile=[32, 32, 32]'`, `--set "
    "report=null`,\n"
    "  `--set 'input.cache={enabled: false}'`.\n"
    "- Anchors, aliases, tags and multiple documents are refused.\n"
    "- An error is one line on stderr, `shardmill: error: FILE:LINE:COL: <what>` (or\n"
    "  `shardmill: error: --set KEY: <what>`), and exit status 2: an unknown key (with the "
    "closest\n"
    "  known key when it is at most two edits away), a wrong type, an out-of-range value, a "
    "duplicate\n"
    "  key, a missing required key, malformed YAML.\n"
    "- Every key names the jobs that use it (`jobs:` below). A key set for another job, in the "
    "file or\n  with `--set`, is exit 2 naming it, e.g. `` `passes` applies to scan jobs only``; "
    "so is a\n  whole group none of whose keys the job uses (`output:` under `job: scan`), even "
    "an empty one.\n"
    "- Keys that must agree with each other are listed under [Rules between "
    "keys](#rules-between-keys).\n"
    "- The canonical text of the effective configuration (sorted `key=value` lines, sizes in "
    "bytes,\n"
    "  unset keys `null`) is what the output's provenance hashes with SHA-256 (SPEC §6).\n";

/* Two example pipelines (the files in configs/ are validated by ctest unit.jobs.configs_validate).
 */
static const char md_examples[] =
    "## Example pipelines\n"
    "\n"
    "A TIFF stack (a directory of 2-D slices in natural name order; `configs/ingest-tiff.yaml`)\n"
    "to a sharded Zarr v3 array of the same type, then an S3 scan and a convert of the result "
    "once it\nis uploaded (`configs/scan-s3.yaml`). An HDF5 dataset is read the same way with "
    "`input.format:\nhdf5` and `input.hdf5.dataset` (`configs/ingest-hdf5.yaml`); the other "
    "sources in\n`configs/ingest-ct.yaml`. Ingest runs under `mpirun` too: each rank reads only "
    "its "
    "shards' slices.\n"
    "\n"
    "```yaml\n"
    "# shardmill run ingest.yaml          (or: mpirun -n 4 shardmill run ingest.yaml)\n"
    "job: ingest\n"
    "input:\n"
    "  store: data/ct-slices      # slice0001.tif ... slice1024.tif\n"
    "  format: tiff               # needed for a directory; inferred for one .tif/.tiff file\n"
    "output:\n"
    "  path: data/ct-v3.zarr      # dtype omitted: the slices' type is kept\n"
    "  shard: [8, 32, 32]\n"
    "  chunk: [2, 16, 16]\n"
    "  codec: {name: zstd, level: 3}\n"
    "```\n"
    "\n"
    "```yaml\n"
    "# AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... shardmill run scan-s3.yaml\n"
    "# (or AWS_PROFILE=name; credentials never come from the file)\n"
    "job: scan                    # job: convert with an output: section converts it\n"
    "input:\n"
    "  store: s3://ct-archive/volumes/ct-v3.zarr   # s3://bucket/prefix\n"
    "  s3:\n"
    "    endpoint: http://127.0.0.1:9000           # omit for AWS itself\n"
    "    region: us-east-1\n"
    "    path_style: true\n"
    "tile: [64, 64, 64]\n"
    "```\n";

/* Every rule between keys that the loader checks (config_rules.c: check_input, check_shapes,
 * check_normalize, check_output, check_export, check_rules), so `validate` refuses what `run`
 * would before any store is opened. A rule added there gets its line here. */
static const char *const md_rules[] = {
    "`job: ingest` | convert with `normalize.mode: none` (the values kept): any other "
    "`normalize` key or mode is refused",
    "`input.hdf5.dataset` | an absolute HDF5 path (such as `/exchange/data`), not the root, "
    "without empty, `.` or `..` components",
    "`input.http.backoff_base_ms`, `input.http.backoff_max_ms` | base <= max",
    "`input.s3.endpoint` | an `http://` or `https://` URL",
    "`roi.offset`, `roi.shape` | the same number of axes",
    "`input.raw.shape` (raw input), `roi.offset`, `roi.shape`, `tile`, "
    "`output.shard` (non-empty), `output.chunk` (convert, ingest), `export.hdf5.chunk` (with an "
    "export) | one value per axis each: the same number of axes (the first key given sets it; "
    "defaults count, so 2-D data needs `output.shard` and `output.chunk` of 2 values)",
    "`input.spacing`, `input.origin` and the keys above | one value per axis of the keys above "
    "when one is given (or the source's fixed count, above); otherwise checked when the run opens "
    "the input (exit 2)",
    "`output.shard`, `output.chunk` | the chunk has the shard's axes and divides it on each axis",
    "`histogram.range`, `histogram.bins` | a range needs `bins` >= 1",
    "`job`, `output.dtype` | a normalized `convert` writes `float32`, `uint8` or `uint16`",
    "`normalize.mode: none`, `output.dtype` | the input's type or a lossless wider one (checked "
    "against the input when the run opens it: a narrowing cast is exit 2 naming `output.dtype`); "
    "no `export.hdf5` (the export writes the normalized types: float32, uint8, uint16)",
    "`job`, `export.hdf5.path` | only `convert` exports",
    "`export.hdf5.dataset` | with an export: an absolute HDF5 path (such as `/data`) of at most "
    "255 bytes, without empty, `.` or `..` components, not the root and not `/histogram` (the "
    "export writes the histogram there)",
    "`output.path`, `export.hdf5.path` | no `..` component (it would let the directories created "
    "on the way, or the target, escape the path named); the last component is a name of its "
    "own (not `/`, `.`); shorter than 4096 bytes",
    "`output.path`, `export.hdf5.path` | the export file is neither inside the output directory "
    "nor contains it (compared by path components, as written)",
    "`input.store` (a local path or `file://`; an ingest source), `output.path`, "
    "`export.hdf5.path`, `report` (and `run --report`) | the output rule (SPEC §6.7): no "
    "written path (output, export, report) is the input, lies inside it or contains it, nor "
    "overlaps another written path (a report inside the output is refused), compared after "
    "resolving links (HTTP inputs are not compared); exit 2 naming the key",
    "`input.s3.*`, `export.hdf5.*` | read only with an `s3://` `input.store`, and "
    "`export.hdf5.path` respectively: given otherwise they are refused, never ignored (so is "
    "an empty `export` or `export.hdf5` group)",
    "`read_bench.extents`, `roi.shape` | exclude each other (a read-bench case is a cube of each "
    "extent at `roi.offset`)",
};

char *sm_config_markdown(void)
{
    struct sm_cfg_sb sb = {NULL, 0, 0, false};
    sm_cfg_sb_printf(&sb, "%s\n%s\n## Rules between keys\n\n", md_head, md_examples);
    sm_cfg_sb_printf(&sb, "Checked by `shardmill validate` and by `shardmill run` before it opens "
                          "any store or file: a\nbroken rule is exit 2 and one error line with the "
                          "file, line and column of the key to change\n(the one the file gives, "
                          "of the keys named).\n\n"
                          "| keys | rule |\n| --- | --- |\n");
    sm_cfg_sb_printf(&sb, "%s", sm_cfg_registry_rules()); /* sources, modes, codecs */
    for (size_t i = 0; i < sizeof(md_rules) / sizeof(md_rules[0]); i++) {
        sm_cfg_sb_printf(&sb, "| %s |\n", md_rules[i]);
    }
    sm_cfg_sb_printf(&sb,
                     "\nChecked only once the input is open (they need its shape or "
                     "type): the ROI lies inside the\narray; the shape keys have one value "
                     "per axis of the array; a NIfTI `ingest` writes the file's\ntype (float32 "
                     "when its `scl_slope`/`scl_inter` scale the values; float64 files stay\n"
                     "float64).\n");
    sm_cfg_sb_printf(&sb, "\n## Keys\n\nA key applies to the jobs named with it; any other job "
                          "refuses it (exit 2).\n\n| key | type | default | jobs |\n"
                          "| --- | --- | --- | --- |\n");
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        static const char *const tnames[] = {"bool", "uint", "int",  "float", "size",   "string",
                                             "enum", "enum", "list", "range", "numbers"};
        sm_cfg_sb_printf(&sb, "| [`%s`](#", k->path);
        for (const char *s = k->path; *s != '\0'; s++) {
            if (*s != '.') { /* GitHub's heading anchors drop dots */
                sm_cfg_sb_printf(&sb, "%c", *s);
            }
        }
        sm_cfg_sb_printf(&sb, ") | %s | ", tnames[k->type]);
        if (k->required != 0) {
            sm_cfg_sb_printf(&sb, "required (");
            md_required(&sb, k);
            sm_cfg_sb_printf(&sb, ")");
        } else {
            md_default(&sb, k, true);
        }
        sm_cfg_sb_printf(&sb, " | ");
        md_jobs(&sb, k->applies);
        sm_cfg_sb_printf(&sb, " |\n");
    }
    for (const struct sm_cfg_group *g = sm_cfg_groups; g->name != NULL; g++) {
        sm_cfg_sb_printf(&sb, "\n## %s\n\n%s\n", g->name, g->help);
        size_t n = strlen(g->name);
        for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
            const struct sm_cfg_key *k = &sm_cfg_keys[i];
            if (strncmp(k->path, g->name, n) != 0 || (k->path[n] != '\0' && k->path[n] != '.')) {
                continue;
            }
            const char *help = sm_cfg_help(k);
            sm_cfg_sb_printf(&sb, "\n### %s\n\n%c%s.\n\n- type: ", k->path,
                             help[0] >= 'a' && help[0] <= 'z' ? help[0] - 'a' + 'A' : help[0],
                             help + 1);
            md_type(&sb, k);
            sm_cfg_sb_printf(&sb, "\n- default: ");
            md_default(&sb, k, false);
            if (k->required != 0) {
                sm_cfg_sb_printf(&sb, "\n- required: ");
                md_required(&sb, k);
            }
            sm_cfg_sb_printf(&sb, "\n- jobs: ");
            md_jobs(&sb, k->applies);
            sm_cfg_sb_printf(&sb, "\n- example: ");
            md_example(&sb, k);
            sm_cfg_sb_printf(&sb, "\n");
        }
    }
    return sm_cfg_sb_finish(&sb);
}
