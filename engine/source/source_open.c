/* The registry of the engine's file sources (shardmill/source.h: sm_source_formats) and
 * sm_source_open, which picks a row by input.format. A new source is one row here plus its own
 * files (CONTRIBUTING.md "A new source"). */
#include "source_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

const struct sm_source_format sm_source_formats[] = {
    {.name = "raw",
     .extensions = "",
     .open = sm_src_open_raw,
     .shape_key = "input.raw.shape",
     .required = "input.raw.dtype|input.raw.shape",
     .noun = "a raw input",
     .doc = "a file of C-order values after input.raw.header_bytes"},
    {.name = "nifti",
     .extensions = ".nii|.nii.gz",
     .open = sm_src_open_nifti,
     .required = "",
     .noun = "a NIfTI-1 input",
     .doc = "a NIfTI-1 file, .nii or .nii.gz"},
    {.name = "tiff",
     .extensions = SM_SRC_TIFF_EXTENSIONS,
     .open = sm_src_open_tiff,
     .ndim = 3,
     .required = "",
     .noun = "a TIFF input",
     .doc = "a directory of 2-D slices in natural name order, or one multi-page file"},
    {.name = "hdf5",
     .extensions = ".h5|.hdf5|.nxs",
     .open = sm_src_open_hdf5,
     .required = "input.hdf5.dataset",
     .noun = "an HDF5 input",
     .doc = "the dataset input.hdf5.dataset of an HDF5 file"},
    {.name = "png",
     .extensions = SM_SRC_PNG_EXTENSIONS,
     .open = sm_src_open_png,
     .ndim = 3,
     .required = "",
     .noun = "a PNG input",
     .doc = "a directory of 2-D grayscale PNG slices (1 to 16 bits) in natural name order, or one "
            "PNG file"},
    {.name = NULL},
};

const struct sm_source_format *sm_source_format_find(const char *name)
{
    for (const struct sm_source_format *f = sm_source_formats; name != NULL && f->name != NULL;
         f++) {
        if (strcmp(f->name, name) == 0) {
            return f;
        }
    }
    return NULL;
}

const struct sm_source_format *sm_source_format_infer(const char *path)
{
    const size_t n = path != NULL ? strlen(path) : 0;
    for (const struct sm_source_format *f = sm_source_formats; n > 0 && f->name != NULL; f++) {
        for (const char *e = f->extensions; *e != '\0';) {
            const size_t len = strcspn(e, "|");
            if (len > 0 && len <= n && strncasecmp(path + n - len, e, len) == 0) {
                return f;
            }
            e += len + (e[len] == '|');
        }
    }
    return NULL;
}

sm_status sm_source_open(const struct sm_source_params *p, struct sm_source **out,
                         struct sm_err *err)
{
    *out = NULL;
    if (p->path == NULL || p->path[0] == '\0') {
        SM_FAIL_AT(err, SM_E_USAGE, "input.store", "a source needs a file");
    }
    const struct sm_source_format *f = sm_source_format_find(p->format);
    if (f != NULL) {
        return f->open(p, out, err);
    }
    char names[160] = ""; /* "a, b, c or d", from the table */
    size_t n = 0;
    for (const struct sm_source_format *g = sm_source_formats; g->name != NULL; g++) {
        const char *sep = g == sm_source_formats ? "" : (g + 1)->name == NULL ? " or " : ", ";
        n += (size_t)snprintf(names + n, n < sizeof(names) ? sizeof(names) - n : 0, "%s%s", sep,
                              g->name);
    }
    SM_FAIL_AT(err, SM_E_USAGE, "input.format", "'%s' is no source format (%s)",
               p->format != NULL ? p->format : "", names);
}
