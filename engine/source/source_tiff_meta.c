/* The voxel size a TIFF states (SPEC §2 "Sources"; source_tiff_meta_int.h), by these rules, the
 * first that applies winning:
 *  1. OME-TIFF: an ImageDescription holding OME-XML whose first <Pixels> element has
 *     PhysicalSizeX or PhysicalSizeY: each axis in its PhysicalSize?Unit (absent: µm, the OME
 *     schema's default), converted into X's unit (Y's when X is absent). A unit that is no space
 *     unit of shardmill/unit.h ("pixel", "reference frame") makes the element say nothing.
 *  2. ImageJ: an ImageDescription starting "ImageJ=" whose unit= is a space unit (ImageJ's
 *     "micron", "um", "\u00B5m" map to micrometer): x, y = 1 / XResolution, 1 / YResolution
 *     (pixels per that unit; 1 when absent), z = spacing= (ImageJ's default 1 when absent).
 *  3. XResolution and YResolution with ResolutionUnit inch or centimeter (absent means inch, as
 *     TIFF 6.0 says): x, y in centimeter (inches converted: 2.54 cm each), so every TIFF-stated
 *     unit is a metric UDUNITS-2 name.
 * An axis OME-XML or plain TIFF tags do not state (OME without PhysicalSizeZ, every plain TIFF's
 * z) takes the x spacing: TIFF has no slice distance, and a guess of cubic voxels keeps spacing-
 * driven decisions (pyramid downsampling) from treating z as very coarse; input.spacing gives
 * the real one. ResolutionUnit none without an ImageJ unit is a pixel aspect ratio only: ignored.
 *
 * OME-XML is read by a small attribute scan, not an XML parser: shardmill links no XML library,
 * and the few attributes of one element need none. The scan skips comments, CDATA sections,
 * processing instructions and declarations (a commented-out <Pixels> is no element), reads sizes
 * only in xsd:float's decimal syntax (never strtod's hex or "inf"), is bounded by the
 * description's length (never past it, no recursion, values copied into fixed buffers) and gives
 * up on anything malformed, returning "no geometry". */
#include "shardmill/sm_config.h"

#include "source_tiff_meta_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardmill/unit.h"

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_name(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
           c == '_' || c == '-' || c == '.';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Whether [v, v + n) is a decimal number as xsd:float spells one (XML Schema 1.1 part 2,
 * section 3.3.5): [+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?, with the blanks
 * the type's whiteSpace="collapse" allows around it. Not strtod's wider grammar: no hex
 * ("0x10"), no "inf" or "nan" words (INF and NaN are xsd:float but no positive size), no
 * locale. */
static bool decimal_syntax(const char *v, size_t n)
{
    size_t i = 0;
    while (i < n && is_space(v[i])) {
        i++;
    }
    while (n > i && is_space(v[n - 1])) {
        n--;
    }
    if (i < n && (v[i] == '+' || v[i] == '-')) {
        i++;
    }
    size_t digits = 0;
    for (; i < n && is_digit(v[i]); i++) {
        digits++;
    }
    if (i < n && v[i] == '.') {
        for (i++; i < n && is_digit(v[i]); i++) {
            digits++;
        }
    }
    if (digits == 0) {
        return false;
    }
    if (i < n && (v[i] == 'e' || v[i] == 'E')) {
        i++;
        if (i < n && (v[i] == '+' || v[i] == '-')) {
            i++;
        }
        const size_t e = i;
        while (i < n && is_digit(v[i])) {
            i++;
        }
        if (i == e) {
            return false;
        }
    }
    return i == n;
}

/* A finite number > 0 spelling all of [v, v + n) in decimal_syntax (at most 63 bytes). */
static bool positive_number(const char *v, size_t n, double *out)
{
    char b[64];
    if (n == 0 || n >= sizeof(b) || !decimal_syntax(v, n)) {
        return false;
    }
    memcpy(b, v, n);
    b[n] = '\0';
    char *end = NULL;
    const double d = strtod(b, &end);
    while (*end != '\0' && is_space(*end)) {
        end++;
    }
    if (end != b + n || !isfinite(d) || !(d > 0)) {
        return false;
    }
    *out = d;
    return true;
}

/* Appends code point cp as UTF-8 to dst[*len], within cap (false when it does not fit). */
static bool put_utf8(char *dst, size_t cap, size_t *len, unsigned long cp)
{
    unsigned char u[4];
    size_t k;
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        k = 1;
    } else if (cp < 0x800) {
        u[0] = (unsigned char)(0xc0 | (cp >> 6));
        u[1] = (unsigned char)(0x80 | (cp & 0x3f));
        k = 2;
    } else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xe0 | (cp >> 12));
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (unsigned char)(0x80 | (cp & 0x3f));
        k = 3;
    } else {
        return false; /* no unit spelling needs more */
    }
    if (*len + k >= cap) {
        return false;
    }
    memcpy(dst + *len, u, k);
    *len += k;
    return true;
}

/* The code point of hex or decimal digits [s, s + n), or ULONG_MAX when they are not. */
static unsigned long code_point(const char *s, size_t n, int base)
{
    unsigned long cp = 0;
    if (n == 0 || n > 6) {
        return (unsigned long)-1;
    }
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        const int d = c >= '0' && c <= '9'                 ? c - '0'
                      : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : base == 16 && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                           : -1;
        if (d < 0) {
            return (unsigned long)-1;
        }
        cp = cp * (unsigned long)base + (unsigned long)d;
    }
    return cp;
}

/* [v, v + n) into dst (cap bytes, NUL-terminated), decoding XML's numeric character references
 * (&#181; &#xB5;) and &amp; (xml) or ImageJ's \uXXXX (!xml). Too long: "?" (no unit's spelling). */
static void decode_value(const char *v, size_t n, bool xml, char *dst, size_t cap)
{
    size_t len = 0;
    bool ok = true;
    for (size_t i = 0; ok && i < n;) {
        if (xml && v[i] == '&') {
            size_t e = i + 1;
            while (e < n && e - i < 12 && v[e] != ';') {
                e++;
            }
            const bool num = e < n && v[e] == ';' && e > i + 2 && v[i + 1] == '#';
            const bool hex = num && (v[i + 2] == 'x' || v[i + 2] == 'X');
            const unsigned long cp =
                num ? code_point(v + i + (hex ? 3 : 2), e - i - (hex ? 3 : 2), hex ? 16 : 10)
                : e < n && e == i + 4 && memcmp(v + i, "&amp", 4) == 0 ? '&'
                                                                       : (unsigned long)-1;
            if (cp != (unsigned long)-1) {
                ok = cp != 0 && put_utf8(dst, cap, &len, cp);
                i = e + 1;
                continue;
            }
        } else if (!xml && v[i] == '\\' && i + 6 <= n && v[i + 1] == 'u') {
            const unsigned long cp = code_point(v + i + 2, 4, 16);
            if (cp != (unsigned long)-1) {
                ok = cp != 0 && put_utf8(dst, cap, &len, cp);
                i += 6;
                continue;
            }
        }
        ok = len + 1 < cap; /* any other byte as it is (UTF-8 included) */
        if (ok) {
            dst[len++] = v[i++];
        }
    }
    if (!ok) {
        len = 0;
        dst[len++] = '?';
    }
    dst[len] = '\0';
}

/* The attributes of the element whose name ends at s[i]: PhysicalSize{X,Y,Z}[Unit]. */
static void pixels_attrs(const char *s, size_t n, size_t i, struct sm_tiff_ome_px *px)
{
    static const char *const axis = "ZYX";
    for (;;) {
        while (i < n && is_space(s[i])) {
            i++;
        }
        const size_t a = i;
        while (i < n && is_name(s[i])) {
            i++;
        }
        const size_t alen = i - a;
        while (i < n && is_space(s[i])) {
            i++;
        }
        if (alen == 0 || i >= n || s[i] != '=') {
            return; /* '>', '/', the end or something malformed: done */
        }
        i++;
        while (i < n && is_space(s[i])) {
            i++;
        }
        if (i >= n || (s[i] != '"' && s[i] != '\'')) {
            return;
        }
        const char q = s[i++];
        const size_t v = i;
        while (i < n && s[i] != q) {
            i++;
        }
        if (i >= n) {
            return; /* an unterminated value */
        }
        const size_t vlen = i - v;
        i++;
        const char *name = s + a;
        if (alen < 13 || memcmp(name, "PhysicalSize", 12) != 0) {
            continue;
        }
        const char *ax = name[12] != '\0' ? strchr(axis, name[12]) : NULL;
        if (ax == NULL) {
            continue;
        }
        const size_t d = (size_t)(ax - axis);
        if (alen == 13) {
            px->has[d] = positive_number(s + v, vlen, &px->size[d]);
        } else if (alen == 17 && memcmp(name + 13, "Unit", 4) == 0) {
            decode_value(s + v, vlen, true, px->unit[d], sizeof(px->unit[d]));
        }
    }
}

/* Whether [s + i, s + n) begins with the n bytes of lit. */
static bool starts(const char *s, size_t n, size_t i, const char *lit)
{
    const size_t k = strlen(lit);
    return n - i >= k && memcmp(s + i, lit, k) == 0;
}

/* The first byte past `close` at or after s[i], or 0 when the text ends first. */
static size_t past(const char *s, size_t n, size_t i, const char *close)
{
    for (; i < n; i++) {
        if (starts(s, n, i, close)) {
            return i + strlen(close);
        }
    }
    return 0;
}

/* s[i] is '<'. Markup that holds no element, and may hold text that looks like one: a comment
 * (<!-- -->), a CDATA section (<![CDATA[ ]]>), a processing instruction (<? ?>) or a declaration
 * such as <!DOCTYPE ...> (up to its '>' outside quotes and its [internal subset]). Returns the
 * first byte past it, i when s[i] starts an element (or anything else), 0 when it is not
 * terminated. */
static size_t markup_end(const char *s, size_t n, size_t i)
{
    if (starts(s, n, i, "<!--")) {
        return past(s, n, i + 4, "-->");
    }
    if (starts(s, n, i, "<![CDATA[")) {
        return past(s, n, i + 9, "]]>");
    }
    if (starts(s, n, i, "<?")) {
        return past(s, n, i + 2, "?>");
    }
    if (!starts(s, n, i, "<!")) {
        return i;
    }
    unsigned depth = 0;
    for (size_t k = i + 2; k < n; k++) {
        if (s[k] == '"' || s[k] == '\'') {
            const char *q = memchr(s + k + 1, s[k], n - k - 1);
            if (q == NULL) {
                return 0;
            }
            k = (size_t)(q - s);
        } else if (depth > 0 && starts(s, n, k, "<!--")) {
            const size_t e = past(s, n, k + 4, "-->");
            if (e == 0) {
                return 0;
            }
            k = e - 1;
        } else if (s[k] == '[') {
            depth++;
        } else if (s[k] == ']' && depth > 0) {
            depth--;
        } else if (s[k] == '>' && depth == 0) {
            return k + 1;
        }
    }
    return 0;
}

bool sm_tiff_parse_ome(const char *s, size_t n, struct sm_tiff_ome_px *px)
{
    memset(px, 0, sizeof(*px));
    size_t i = 0;
    while (i < n && is_space(s[i])) {
        i++;
    }
    if (i >= n || s[i] != '<') {
        return false;
    }
    for (; i < n; i++) {
        if (s[i] != '<') {
            continue;
        }
        if (starts(s, n, i, "<!") || starts(s, n, i, "<?")) {
            /* only these: markup_end's 0 (unterminated) is also an element's start at byte 0 */
            const size_t skip = markup_end(s, n, i);
            if (skip == 0) {
                return false; /* an unterminated comment, CDATA section or declaration */
            }
            i = skip - 1; /* the loop's i++ steps past its end */
            continue;
        }
        size_t k = i + 1, local = i + 1;
        while (k < n && is_name(s[k])) {
            if (s[k] == ':') {
                local = k + 1; /* a namespace prefix: <ome:Pixels */
            }
            k++;
        }
        if (k - local == 6 && memcmp(s + local, "Pixels", 6) == 0 && k < n &&
            (is_space(s[k]) || s[k] == '/' || s[k] == '>')) {
            pixels_attrs(s, n, k, px);
            return true;
        }
    }
    return false;
}

bool sm_tiff_parse_imagej(const char *s, size_t n, struct sm_tiff_imagej *ij)
{
    memset(ij, 0, sizeof(*ij));
    if (n < 7 || memcmp(s, "ImageJ=", 7) != 0) {
        return false;
    }
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && s[e] != '\n') {
            e++;
        }
        size_t end = e > i && s[e - 1] == '\r' ? e - 1 : e;
        const char *eq = memchr(s + i, '=', end - i);
        if (eq != NULL) {
            const size_t klen = (size_t)(eq - (s + i)), v = (size_t)(eq - s) + 1;
            if (klen == 7 && memcmp(s + i, "spacing", 7) == 0) {
                ij->has_spacing = positive_number(s + v, end - v, &ij->spacing);
            } else if (klen == 4 && memcmp(s + i, "unit", 4) == 0) {
                decode_value(s + v, end - v, false, ij->unit, sizeof(ij->unit));
            }
        }
        i = e + 1;
    }
    return true;
}

static bool all_positive(const double *v)
{
    return isfinite(v[0]) && isfinite(v[1]) && isfinite(v[2]) && v[0] > 0 && v[1] > 0 && v[2] > 0;
}

/* Rule 1. */
static bool ome_geometry(const struct sm_tiff_ome_px *px, struct sm_tiff_geom *g)
{
    const char *u[3] = {NULL, NULL, NULL};
    for (int d = 0; d < 3; d++) {
        if (px->has[d]) {
            u[d] = px->unit[d][0] != '\0' ? sm_unit_space_lookup(px->unit[d]) : "micrometer";
            if (u[d] == NULL) {
                return false;
            }
        }
    }
    const int ref = px->has[2] ? 2 : px->has[1] ? 1 : -1;
    if (ref < 0) {
        return false;
    }
    const char *unit = sm_unit_space_name(u[ref]);
    double v[3];
    for (int d = 0; d < 3; d++) {
        v[d] = px->has[d] ? px->size[d] * sm_unit_space_factor(u[d], unit) : 0.0;
        if (px->has[d] && !(isfinite(v[d]) && v[d] > 0)) { /* stated, but not in one unit */
            snprintf(g->refused, sizeof(g->refused),
                     "OME-XML PhysicalSize%c %g %s is %g %s: no finite size > 0", "ZYX"[d],
                     px -> size[d], u[d], v[d], unit);
            return false;
        }
    }
    g->spacing[2] = px->has[2] ? v[2] : v[1];
    g->spacing[1] = px->has[1] ? v[1] : v[2];
    g->spacing[0] = px->has[0] ? v[0] : g->spacing[2];
    g->unit = unit;
    return all_positive(g->spacing);
}

static bool resolution_ok(const struct sm_tiff_tags *t)
{
    return t->has_res && isfinite(t->xres) && isfinite(t->yres) && t->xres > 0 && t->yres > 0;
}

/* Rule 2. */
static bool imagej_geometry(const struct sm_tiff_tags *t, const struct sm_tiff_imagej *ij,
                            struct sm_tiff_geom *g)
{
    const char *unit = ij->unit[0] != '\0' ? sm_unit_space_lookup(ij->unit) : NULL;
    if (unit == NULL) {
        return false;
    }
    const bool res = resolution_ok(t);
    g->spacing[2] = res ? 1.0 / t->xres : 1.0;
    g->spacing[1] = res ? 1.0 / t->yres : 1.0;
    g->spacing[0] = ij->has_spacing ? ij->spacing : 1.0;
    g->unit = unit;
    return all_positive(g->spacing);
}

/* Rule 3. */
static bool resolution_geometry(const struct sm_tiff_tags *t, struct sm_tiff_geom *g)
{
    if (!resolution_ok(t) || (t->resunit != 2 && t->resunit != 3)) {
        return false;
    }
    const double cm = t->resunit == 2 ? 2.54 : 1.0; /* an inch is 2.54 cm by definition */
    g->spacing[2] = cm / t->xres;
    g->spacing[1] = cm / t->yres;
    g->spacing[0] = g->spacing[2];
    g->unit = sm_unit_space_name("centimeter");
    return all_positive(g->spacing);
}

void sm_tiff_geometry(const struct sm_tiff_tags *t, struct sm_tiff_geom *g)
{
    memset(g, 0, sizeof(*g));
    struct sm_tiff_ome_px px;
    struct sm_tiff_imagej ij;
    const char *s = t->desc;
    const size_t n = s != NULL ? t->desc_len : 0;
    if (sm_tiff_parse_ome(s, n, &px) && ome_geometry(&px, g)) {
        g->from = "ome-xml";
    } else if (g->refused[0] != '\0') {
        g->spacing[0] = g->spacing[1] = g->spacing[2] = 0.0; /* the refusal alone */
        g->unit = NULL;
        return;
    } else if (sm_tiff_parse_imagej(s, n, &ij) && imagej_geometry(t, &ij, g)) {
        g->from = "imagej";
    } else if (resolution_geometry(t, g)) {
        g->from = "tiff-resolution";
    } else {
        memset(g, 0, sizeof(*g));
        return;
    }
    g->set = true;
}
