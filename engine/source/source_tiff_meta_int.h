/* Internal to source/: the voxel size a TIFF's first page states (source_tiff_meta.c), from the
 * bytes of its ImageDescription and its resolution tags. Pure functions over bytes the file holds
 * (fuzzed: tests/fuzz/fuzz_tiff_meta.c); no libtiff here. */
#ifndef SM_SOURCE_SOURCE_TIFF_META_INT_H
#define SM_SOURCE_SOURCE_TIFF_META_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The tags as read from the first page. */
struct sm_tiff_tags {
    const char *desc; /* ImageDescription (any bytes, not NUL-terminated), or NULL */
    size_t desc_len;
    bool has_res;      /* XResolution and YResolution both present */
    double xres, yres; /* pixels per ResolutionUnit */
    uint16_t resunit;  /* 1 none, 2 inch, 3 centimeter (TIFF 6.0: absent means inch) */
};

/* What they state: spacing in [z, y, x] order, each finite and > 0, in `unit` (a name of
 * shardmill/unit.h, or NULL: none). set false: they state no geometry. refused (set false): the
 * OME-XML element states sizes that are no finite number > 0 once converted into one unit
 * (PhysicalSizeZ="1.7e308" in m with X in µm), saying which; a source refuses such a file
 * rather than drop the geometry it states (issue 32 item 11). Empty otherwise. */
struct sm_tiff_geom {
    bool set;
    double spacing[3];
    const char *unit;
    const char *from; /* "ome-xml" | "imagej" | "tiff-resolution" */
    char refused[160];
};

/* OME-XML's first <Pixels> element: PhysicalSize{Z,Y,X} (has: a finite number > 0) and their
 * units as written (empty: the attribute is absent, which OME's schema defines as µm). */
struct sm_tiff_ome_px {
    bool has[3];
    double size[3];
    char unit[3][24];
};
/* False when the text is no OME-XML (it must begin with '<' after blanks) or has no <Pixels>. */
bool sm_tiff_parse_ome(const char *s, size_t n, struct sm_tiff_ome_px *px);

/* An ImageJ description ("ImageJ=..." lines of key=value): spacing= and unit= (unit as written,
 * \uXXXX escapes decoded to UTF-8; empty when absent or too long). False when not ImageJ's. */
struct sm_tiff_imagej {
    bool has_spacing;
    double spacing;
    char unit[24];
};
bool sm_tiff_parse_imagej(const char *s, size_t n, struct sm_tiff_imagej *ij);

/* The geometry the tags state, by the rules of source_tiff_meta.c. */
void sm_tiff_geometry(const struct sm_tiff_tags *t, struct sm_tiff_geom *g);

#endif
