/* The space units of shardmill/unit.h: OME-NGFF 0.5's list of UDUNITS-2 names for "space" axes
 * (its "axes" section: angstrom ... zettameter), each with its length in meters (for the TIFF
 * source, which converts one axis's unit into another's), and the spellings files and users
 * write for them. Exact byte comparisons only: no locale. */
#include "shardmill/sm_config.h"

#include "shardmill/unit.h"

#include <stdio.h>
#include <string.h>

#define NOEXP 99

static const struct {
    const char *name;
    double meters;
    int exp10; /* meters = 10^exp10 for the metric ones; NOEXP otherwise */
} units[] = {
    {"angstrom", 1e-10, -10},   {"attometer", 1e-18, -18},
    {"centimeter", 1e-2, -2},   {"decimeter", 1e-1, -1},
    {"exameter", 1e18, 18},     {"femtometer", 1e-15, -15},
    {"foot", 0.3048, NOEXP},    {"gigameter", 1e9, 9},
    {"hectometer", 1e2, 2},     {"inch", 0.0254, NOEXP},
    {"kilometer", 1e3, 3},      {"megameter", 1e6, 6},
    {"meter", 1.0, 0},          {"micrometer", 1e-6, -6},
    {"mile", 1609.344, NOEXP},  {"millimeter", 1e-3, -3},
    {"nanometer", 1e-9, -9},    {"parsec", 3.0856775814913673e16, NOEXP},
    {"petameter", 1e15, 15},    {"picometer", 1e-12, -12},
    {"terameter", 1e12, 12},    {"yard", 0.9144, NOEXP},
    {"yoctometer", 1e-24, -24}, {"yottameter", 1e24, 24},
    {"zeptometer", 1e-21, -21}, {"zettameter", 1e21, 21},
};
#define NUNITS (sizeof(units) / sizeof(units[0]))

/* Symbols and words (case-sensitive: "Pm" is a petameter, "pm" a picometer). */
static const struct {
    const char *alias, *name;
} aliases[] = {
    {"um", "micrometer"},
    {"\xc2\xb5m", "micrometer"}, /* U+00B5 MICRO SIGN */
    {"\xce\xbcm", "micrometer"}, /* U+03BC GREEK SMALL LETTER MU */
    {"micron", "micrometer"},
    {"microns", "micrometer"},
    {"am", "attometer"},
    {"zm", "zeptometer"},
    {"ym", "yoctometer"},
    {"fm", "femtometer"},
    {"pm", "picometer"},
    {"nm", "nanometer"},
    {"mm", "millimeter"},
    {"cm", "centimeter"},
    {"dm", "decimeter"},
    {"m", "meter"},
    {"hm", "hectometer"},
    {"km", "kilometer"},
    {"Mm", "megameter"},
    {"Gm", "gigameter"},
    {"Tm", "terameter"},
    {"Pm", "petameter"},
    {"Em", "exameter"},
    {"Zm", "zettameter"},
    {"Ym", "yottameter"},
    {"A", "angstrom"},
    {"\xc3\x85", "angstrom"},     /* U+00C5 */
    {"\xe2\x84\xab", "angstrom"}, /* U+212B ANGSTROM SIGN */
    {"in", "inch"},
    {"inches", "inch"},
    {"ft", "foot"},
    {"feet", "foot"},
    {"yd", "yard"},
    {"mi", "mile"},
    {"pc", "parsec"},
};

const char *sm_unit_space_name(const char *s)
{
    for (size_t i = 0; s != NULL && i < NUNITS; i++) {
        if (strcmp(s, units[i].name) == 0) {
            return units[i].name;
        }
    }
    return NULL;
}

/* A name in other case, plural or "-metre" spelling: lowercased ASCII, "metre" -> "meter", one
 * trailing "s" dropped. */
static const char *loose_name(const char *s)
{
    char b[40];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof(b)) {
        return NULL;
    }
    for (size_t i = 0; i <= n; i++) {
        const char c = s[i];
        b[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
    }
    char *metre = strstr(b, "metre");
    if (metre != NULL) {
        memcpy(metre, "meter", 5);
    }
    const char *hit = sm_unit_space_name(b);
    if (hit == NULL && n > 1 && b[n - 1] == 's') {
        b[n - 1] = '\0';
        hit = sm_unit_space_name(b);
    }
    return hit;
}

const char *sm_unit_space_alias(const char *s)
{
    if (s == NULL || sm_unit_space_name(s) != NULL) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (strcmp(s, aliases[i].alias) == 0) {
            return sm_unit_space_name(aliases[i].name);
        }
    }
    return loose_name(s);
}

const char *sm_unit_space_lookup(const char *s)
{
    const char *n = sm_unit_space_name(s);
    return n != NULL ? n : sm_unit_space_alias(s);
}

static int find(const char *name)
{
    for (size_t i = 0; name != NULL && i < NUNITS; i++) {
        if (strcmp(name, units[i].name) == 0) {
            return (int)i;
        }
    }
    return -1;
}

double sm_unit_space_meters(const char *name)
{
    const int i = find(name);
    return i >= 0 ? units[i].meters : 0.0;
}

double sm_unit_space_factor(const char *from, const char *to)
{
    const int a = find(from), b = find(to);
    if (a < 0 || b < 0) {
        return 0.0;
    }
    if (units[a].exp10 != NOEXP && units[b].exp10 != NOEXP) { /* 2 um = 2000 nm exactly */
        const int k = units[a].exp10 - units[b].exp10;
        double p = 1.0; /* 10^|k|, exact for |k| <= 22, and one rounding for 10^-|k| */
        for (int i = 0; i < (k < 0 ? -k : k); i++) {
            p *= 10.0;
        }
        return k < 0 ? 1.0 / p : p;
    }
    return units[a].meters / units[b].meters;
}

char *sm_unit_space_names(char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NUNITS && len < cap; i++) {
        const int w = snprintf(buf + len, cap - len, "%s%s", i > 0 ? ", " : "", units[i].name);
        len += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

char *sm_unit_space_refusal(const char *s, char *buf, size_t cap)
{
    const char *near = sm_unit_space_alias(s);
    if (near != NULL) {
        snprintf(buf, cap, "'%.40s' is not a UDUNITS-2 space unit: did you mean %s?", s, near);
        return buf;
    }
    char names[SM_UNIT_NAMES_MAX];
    snprintf(buf, cap, "'%.40s' is not a UDUNITS-2 space unit (OME-NGFF 0.5): one of %s", s,
             sm_unit_space_names(names, sizeof(names)));
    return buf;
}
