/* libFuzzer target: the TIFF geometry parsers (engine/source/source_tiff_meta.c): an
 * ImageDescription holding ImageJ's key=value lines or OME-XML, with the resolution tags. Input:
 * 1 byte (bit 0: XResolution/YResolution present; bits 1-2: ResolutionUnit 0..3), XResolution
 * and YResolution as little-endian float32 (libtiff's type for them), then the description bytes
 * (not NUL-terminated: the replay copies them into an exactly sized buffer, so a read past the
 * length is an ASan report). Beyond "no crash": a geometry found has three finite spacings > 0,
 * a unit that is NULL or a name of shardmill/unit.h, and one of the three rule names; a refused
 * one (refused[] set, issue 32 item 11) is no geometry. The OME-XML scan reads XML (item 12): for
 * a description starting with '<', a comment, CDATA section or processing instruction put before
 * it (bits 3-4 of the first byte pick one), holding a <Pixels> of its own, changes nothing the
 * scan finds; every size it finds is finite and > 0. */
#include "shardmill/sm_config.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shardmill/unit.h"
#include "source_tiff_meta_int.h" /* checksrc: allow int-header (the pure parser it fuzzes) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static float f32_at(const uint8_t *p)
{
    const uint32_t u =
        (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* Whether two scans found the same: sizes bit for bit, units as strings. */
static bool same_px(const struct sm_tiff_ome_px *a, const struct sm_tiff_ome_px *b)
{
    for (int d = 0; d < 3; d++) {
        if (a->has[d] != b->has[d] || (a->has[d] && memcmp(&a->size[d], &b->size[d], 8) != 0) ||
            strcmp(a->unit[d], b->unit[d]) != 0) {
            return false;
        }
    }
    return true;
}

/* Markup that holds no element, each with a <Pixels> inside (item 12). */
static const char *const decoys[] = {
    "<!-- <Pixels PhysicalSizeX=\"7\" PhysicalSizeY=\"7\" PhysicalSizeZ=\"7\"/> -->",
    "<![CDATA[<Pixels PhysicalSizeX=\"7\" PhysicalSizeY=\"7\"/>]]>",
    "<?pi <Pixels PhysicalSizeX=\"7\" PhysicalSizeY=\"7\"/> ?>",
    "<!DOCTYPE OME [ <!ENTITY e '<Pixels PhysicalSizeX=\"7\">'> ]>",
};

/* The scan of the description alone and after a decoy agree. */
static void check_decoy(const char *desc, size_t n, unsigned which)
{
    static char buf[1 << 16];
    size_t i = 0;
    while (i < n && (desc[i] == ' ' || desc[i] == '\t' || desc[i] == '\n' || desc[i] == '\r')) {
        i++;
    }
    const char *decoy = decoys[which % (sizeof(decoys) / sizeof(decoys[0]))];
    const size_t k = strlen(decoy);
    if (i >= n || desc[i] != '<' || n + k > sizeof(buf)) {
        return;
    }
    memcpy(buf, decoy, k);
    memcpy(buf + k, desc, n);
    struct sm_tiff_ome_px a, b;
    const bool fa = sm_tiff_parse_ome(desc, n, &a);
    const bool fb = sm_tiff_parse_ome(buf, n + k, &b);
    if (fa != fb || (fa && !same_px(&a, &b))) {
        __builtin_trap();
    }
    for (int d = 0; fa && d < 3; d++) {
        if (a.has[d] && !(isfinite(a.size[d]) && a.size[d] > 0)) {
            __builtin_trap();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 9) {
        return 0;
    }
    const struct sm_tiff_tags t = {
        .desc = (const char *)data + 9,
        .desc_len = size - 9,
        .has_res = (data[0] & 1) != 0,
        .xres = f32_at(data + 1),
        .yres = f32_at(data + 5),
        .resunit = (uint16_t)((data[0] >> 1) & 3),
    };
    struct sm_tiff_geom g;
    sm_tiff_geometry(&t, &g);
    if (g.set) {
        for (int d = 0; d < 3; d++) {
            if (!isfinite(g.spacing[d]) || !(g.spacing[d] > 0)) {
                __builtin_trap();
            }
        }
        if ((g.unit != NULL && sm_unit_space_name(g.unit) != g.unit) || g.from == NULL ||
            (strcmp(g.from, "ome-xml") != 0 && strcmp(g.from, "imagej") != 0 &&
             strcmp(g.from, "tiff-resolution") != 0)) {
            __builtin_trap();
        }
    }
    if (g.refused[0] != '\0' && (g.set || memchr(g.refused, '\0', sizeof(g.refused)) == NULL)) {
        __builtin_trap();
    }
    check_decoy(t.desc, t.desc_len, (unsigned)(data[0] >> 3) & 3u);
    struct sm_tiff_ome_px px; /* the parts alone: their strings stay terminated in place */
    if (sm_tiff_parse_ome(t.desc, t.desc_len, &px)) {
        for (int d = 0; d < 3; d++) {
            if (memchr(px.unit[d], '\0', sizeof(px.unit[d])) == NULL) {
                __builtin_trap();
            }
        }
    }
    struct sm_tiff_imagej ij;
    if (sm_tiff_parse_imagej(t.desc, t.desc_len, &ij) &&
        memchr(ij.unit, '\0', sizeof(ij.unit)) == NULL) {
        __builtin_trap();
    }
    return 0;
}
