/* Unit tests for engine/source/source_tiff_meta.c: the voxel size of a TIFF's first page from
 * ImageJ's description (spacing=, unit= with ImageJ's spellings and \u00B5 escape, resolution
 * as pixels per unit, defaults of 1), OME-XML (the first <Pixels>, prefixes, either quote,
 * character references, per-axis units converted into X's, µm when absent, missing Z = X,
 * "pixel" units refused), plain resolution tags (inch and centimeter into centimeter, none
 * ignored), the order of the rules, and malformed text giving "no geometry" without reading past
 * its length. */
#include "shardmill/sm_config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "source_tiff_meta_int.h"

static struct sm_tiff_geom geom_of(const char *desc, bool res, double xr, double yr, uint16_t ru)
{
    struct sm_tiff_tags t = {desc, desc != NULL ? strlen(desc) : 0, res, xr, yr, ru};
    struct sm_tiff_geom g;
    sm_tiff_geometry(&t, &g);
    return g;
}

static void expect(const struct sm_tiff_geom *g, double z, double y, double x, const char *unit,
                   const char *from)
{
    assert_true(g->set);
    assert_true(g->spacing[0] == z);
    assert_true(g->spacing[1] == y);
    assert_true(g->spacing[2] == x);
    assert_string_equal(g->unit, unit);
    assert_string_equal(g->from, from);
}

static void test_imagej(void **state)
{
    (void)state;
    /* tifffile.imwrite(imagej=True, resolution=(2, 2), metadata={spacing: 2.0, unit: um}) */
    const char *tf = "ImageJ=1.11a\nimages=4\nslices=4\nhyperstack=true\nmode=grayscale\n"
                     "spacing=2.0\nunit=um";
    struct sm_tiff_geom g = geom_of(tf, true, 2.0, 2.0, 1);
    expect(&g, 2.0, 0.5, 0.5, "micrometer", "imagej");
    g = geom_of("ImageJ=1.53t\r\nunit=micron\r\nspacing=0.25\r\n", true, 4.0, 8.0, 1);
    expect(&g, 0.25, 0.125, 0.25, "micrometer", "imagej");
    g = geom_of("ImageJ=1.53t\nunit=\\u00B5m\n", false, 0, 0, 2); /* ImageJ's own escape */
    expect(&g, 1.0, 1.0, 1.0, "micrometer", "imagej");
    g = geom_of("ImageJ=1.53t\nunit=mm\nspacing=1.5\n", true, 0.5, 0.5, 3); /* unit wins */
    expect(&g, 1.5, 2.0, 2.0, "millimeter", "imagej");
    struct sm_tiff_imagej ij;
    assert_true(sm_tiff_parse_imagej("ImageJ=\nspacing=abc\nunit=\n", 26, &ij));
    assert_false(ij.has_spacing);
    assert_string_equal(ij.unit, "");
    assert_false(sm_tiff_parse_imagej("imagej=1\nunit=um", 17, &ij));
    /* an ImageJ unit that is no length: the resolution rule (ResolutionUnit none: nothing) */
    g = geom_of("ImageJ=1.53t\nunit=pixel\nspacing=3\n", true, 2.0, 2.0, 1);
    assert_false(g.set);
    g = geom_of("ImageJ=1.53t\nunit=pixel\n", true, 2.0, 2.0, 3);
    expect(&g, 0.5, 0.5, 0.5, "centimeter", "tiff-resolution");
    g = geom_of("ImageJ=1.53t\nunit=um\nspacing=-1\n", true, 2.0, 2.0, 1); /* ImageJ default */
    expect(&g, 1.0, 0.5, 0.5, "micrometer", "imagej");
}

static const char *ome_head = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><OME xmlns=\"http://www."
                              "openmicroscopy.org/Schemas/OME/2016-06\"><Image ID=\"Image:0\">";

static struct sm_tiff_geom ome_geom(const char *pixels)
{
    char b[1024];
    snprintf(b, sizeof(b), "%s%s<Channel ID=\"Channel:0:0\"/></Pixels></Image></OME>", ome_head,
             pixels);
    return geom_of(b, true, 1.0, 1.0, 1);
}

static void test_ome_xml(void **state)
{
    (void)state;
    struct sm_tiff_geom g = ome_geom(
        "<Pixels ID=\"Pixels:0\" DimensionOrder=\"XYCZT\" Type=\"uint16\" SizeX=\"8\" "
        "PhysicalSizeX=\"0.5\" PhysicalSizeXUnit=\"\xc2\xb5m\" PhysicalSizeY=\"0.5\" "
        "PhysicalSizeYUnit=\"\xc2\xb5m\" PhysicalSizeZ=\"2.0\" PhysicalSizeZUnit=\"\xc2\xb5m\">");
    expect(&g, 2.0, 0.5, 0.5, "micrometer", "ome-xml");
    /* no unit attributes: µm (the schema's default) */
    g = ome_geom("<Pixels PhysicalSizeZ='3' PhysicalSizeY='0.25' PhysicalSizeX='0.25'>");
    expect(&g, 3.0, 0.25, 0.25, "micrometer", "ome-xml");
    /* per-axis units into X's: 2 µm = 2000 nm exactly; a character reference; a prefix */
    g = ome_geom("<ome:Pixels\n PhysicalSizeX = \"500\" PhysicalSizeXUnit=\"nm\" "
                 "PhysicalSizeY=\"0.5\" PhysicalSizeYUnit=\"&#xB5;m\" PhysicalSizeZ=\"2\" "
                 "PhysicalSizeZUnit=\"&#181;m\">");
    expect(&g, 2000.0, 500.0, 500.0, "nanometer", "ome-xml");
    /* no Z: the x spacing; only Y: x = y */
    g = ome_geom("<Pixels PhysicalSizeX=\"0.3\" PhysicalSizeY=\"0.4\" PhysicalSizeXUnit=\"mm\" "
                 "PhysicalSizeYUnit=\"mm\">");
    expect(&g, 0.3, 0.4, 0.3, "millimeter", "ome-xml");
    g = ome_geom("<Pixels PhysicalSizeY=\"0.4\" PhysicalSizeYUnit=\"cm\">");
    expect(&g, 0.4, 0.4, 0.4, "centimeter", "ome-xml");
    /* not a space unit, no sizes, bad numbers: no geometry (then ImageJ/resolution: none) */
    g = ome_geom("<Pixels PhysicalSizeX=\"1\" PhysicalSizeXUnit=\"pixel\">");
    assert_false(g.set);
    g = ome_geom("<Pixels SizeX=\"8\">");
    assert_false(g.set);
    g = ome_geom("<Pixels PhysicalSizeX=\"-1\" PhysicalSizeY=\"nan\" PhysicalSizeZ=\"1e999\">");
    assert_false(g.set);
    /* the first Pixels element only; a "PixelsX" element is not one */
    g = ome_geom("<PixelsX PhysicalSizeX=\"9\"/><Pixels PhysicalSizeX=\"1\" "
                 "PhysicalSizeY=\"1\"/><Pixels PhysicalSizeX=\"7\">");
    expect(&g, 1.0, 1.0, 1.0, "micrometer", "ome-xml");
    /* OME-XML wins over resolution tags */
    char b[512];
    snprintf(b, sizeof(b), "%s<Pixels PhysicalSizeX=\"2\" PhysicalSizeY=\"2\">", ome_head);
    g = geom_of(b, true, 100.0, 100.0, 3);
    expect(&g, 2.0, 2.0, 2.0, "micrometer", "ome-xml");
}

/* Issue 32 item 12: sizes only in xsd:float's decimal syntax; comments, CDATA sections,
 * processing instructions and declarations hold no element. */
static void test_ome_xml_syntax(void **state)
{
    (void)state;
    /* strtod reads these; xsd:float does not: no geometry */
    const char *not_float[] = {"0x10", "0X1p4", "inf", "INF", "infinity", "NaN", "1e", "1e+", ".",
                               "+",    "1.5f",  "1,5", "1 2", "--1",      "0x",  "e5", ""};
    for (size_t i = 0; i < sizeof(not_float) / sizeof(not_float[0]); i++) {
        char px[128];
        snprintf(px, sizeof(px), "<Pixels PhysicalSizeX=\"%s\" PhysicalSizeY=\"%s\">", not_float[i],
                 not_float[i]);
        struct sm_tiff_geom g = ome_geom(px);
        assert_false(g.set);
    }
    /* xsd:float's own forms, blanks around them (whiteSpace collapse) */
    struct sm_tiff_geom g =
        ome_geom("<Pixels PhysicalSizeX=\"+.5\" PhysicalSizeY=\" 5E-1 \" PhysicalSizeZ=\"2.\">");
    expect(&g, 2.0, 0.5, 0.5, "micrometer", "ome-xml");
    /* OME-XML without an XML declaration: the root element at byte 0 is an element, not an
     * unterminated markup (the fuzz target's decoy check found it read no geometry) */
    struct sm_tiff_ome_px px;
    const char *bare = "<OME><Image ID=\"Image:0\"><Pixels PhysicalSizeX=\"2\" "
                       "PhysicalSizeY=\"2\" PhysicalSizeZ=\"3\"/></Image></OME>";
    assert_true(sm_tiff_parse_ome(bare, strlen(bare), &px));
    assert_true(px.has[0] && px.has[1] && px.has[2]);
    assert_true(px.size[0] == 3.0 && px.size[1] == 2.0 && px.size[2] == 2.0);
    const char *root = "<Pixels PhysicalSizeX=\"5\">";
    assert_true(sm_tiff_parse_ome(root, strlen(root), &px));
    assert_true(px.has[2] && px.size[2] == 5.0);
    /* a commented-out <Pixels> is no element: the real one's sizes */
    g = ome_geom("<!-- <Pixels PhysicalSizeX=\"9\" PhysicalSizeY=\"9\"> --><Pixels "
                 "PhysicalSizeX=\"1\" PhysicalSizeY=\"1\">");
    expect(&g, 1.0, 1.0, 1.0, "micrometer", "ome-xml");
    g = ome_geom("<!--<Pixels PhysicalSizeX=\"9\"/>--><!----><Pixels PhysicalSizeX=\"3\">");
    expect(&g, 3.0, 3.0, 3.0, "micrometer", "ome-xml");
    g = ome_geom("<Description><![CDATA[<Pixels PhysicalSizeX=\"9\"> ]] >]]></Description>"
                 "<?pi <Pixels PhysicalSizeX=\"8\"> ?><Pixels PhysicalSizeX=\"4\">");
    expect(&g, 4.0, 4.0, 4.0, "micrometer", "ome-xml");
    /* a declaration with an internal subset holding '>' and a commented element */
    char b[1024];
    snprintf(b, sizeof(b),
             "<?xml version=\"1.0\"?><!DOCTYPE OME [ <!ENTITY e \"<Pixels "
             "PhysicalSizeX='9'>\"> <!-- <Pixels PhysicalSizeX=\"7\"> --> ]><OME><Pixels "
             "PhysicalSizeX=\"5\" PhysicalSizeY=\"5\"></Pixels></OME>");
    g = geom_of(b, false, 0, 0, 1);
    expect(&g, 5.0, 5.0, 5.0, "micrometer", "ome-xml");
    /* a comment or section that never ends: nothing after it counts */
    g = ome_geom("<!-- <Pixels PhysicalSizeX=\"9\">");
    assert_false(g.set);
    g = ome_geom("<![CDATA[ <Pixels PhysicalSizeX=\"9\">");
    assert_false(g.set);
    /* only a commented-out <Pixels>: no OME geometry, the resolution tags rule */
    snprintf(b, sizeof(b), "%s<!-- <Pixels PhysicalSizeX=\"2\"> --></Image></OME>", ome_head);
    g = geom_of(b, true, 4.0, 4.0, 3);
    expect(&g, 0.25, 0.25, 0.25, "centimeter", "tiff-resolution");
    /* ImageJ's spacing= likewise */
    g = geom_of("ImageJ=1.53t\nunit=um\nspacing=0x10\n", false, 0, 0, 1);
    expect(&g, 1.0, 1.0, 1.0, "micrometer", "imagej");
}

static void test_resolution(void **state)
{
    (void)state;
    struct sm_tiff_geom g = geom_of(NULL, true, 254.0, 127.0, 2); /* dpi: into centimeter */
    expect(&g, 2.54 / 254.0, 2.54 / 127.0, 2.54 / 254.0, "centimeter", "tiff-resolution");
    g = geom_of("{\"shape\": [4, 8, 8]}", true, 10000.0, 10000.0, 3);
    expect(&g, 1e-4, 1e-4, 1e-4, "centimeter", "tiff-resolution");
    g = geom_of(NULL, true, 1.0, 1.0, 1); /* tifffile's default: a pixel aspect ratio only */
    assert_false(g.set);
    g = geom_of(NULL, false, 0.0, 0.0, 2);
    assert_false(g.set);
    g = geom_of(NULL, true, 0.0, 72.0, 2);
    assert_false(g.set);
    g = geom_of(NULL, true, 1e-320, 1.0, 3); /* 1 / denormal: infinite */
    assert_false(g.set);
}

/* Cut-off text: every prefix of a valid description parses without reading past its length
 * (the copy is exactly sized for ASan). */
static void test_truncated(void **state)
{
    (void)state;
    char full[1024];
    snprintf(full, sizeof(full),
             "%s<Pixels PhysicalSizeX=\"0.5\" PhysicalSizeXUnit=\"&#181;m\" PhysicalSizeY=\"0.5\">",
             ome_head);
    const char *ij = "ImageJ=1.11a\nspacing=2.0\nunit=\\u00B5m\n";
    const char *texts[] = {full, ij};
    for (size_t k = 0; k < 2; k++) {
        const size_t n = strlen(texts[k]);
        for (size_t len = 0; len <= n; len++) {
            char *p = malloc(len > 0 ? len : 1);
            assert_non_null(p);
            memcpy(p, texts[k], len);
            struct sm_tiff_tags t = {p, len, false, 0, 0, 2};
            struct sm_tiff_geom g;
            sm_tiff_geometry(&t, &g);
            if (g.set) {
                assert_true(g.spacing[0] > 0 && g.spacing[1] > 0 && g.spacing[2] > 0);
            }
            free(p);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_imagej),         cmocka_unit_test(test_ome_xml),
        cmocka_unit_test(test_ome_xml_syntax), cmocka_unit_test(test_resolution),
        cmocka_unit_test(test_truncated),
    };
    return cmocka_run_group_tests_name("tiff_meta", tests, NULL, NULL);
}
