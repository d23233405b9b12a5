/* The space units of shardmill/unit.h: OME-NGFF 0.5's list of UDUNITS-2 names for "space" axes
 * (its "axes" section: angstrom ... zettameter), each with its length in meters (for the TIFF
 * source, which converts one axis's unit into another's), and the spellings files and users
 * write for them. Exact byte comparisons only: no locale. */
#include "shardmill/sm_config.h"

#include "shardmill/unit.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    double meters;
} units[] = {
    {"angstrom", 1e-10},   {"attometer", 1e-18},  {"centimeter", 1e-2},
    {"decimeter", 1e-1},   {"exameter", 1e18},    {"femtometer", 1e-15},
    {"foot", 0.3048},      {"gigameter", 1e9},    {"hectometer", 1e2},
    {"inch", 0.0254},      {"kilometer", 1e3},    {"megameter", 1e6},
    {"meter", 1.0},        {"micrometer", 1e-6},  {"mile", 1609.344},
    {"millimeter", 1e-3},  {"nanometer", 1e-9},   {"parsec", 3.0856775814913673e16},
    {"petameter", 1e15},   {"picometer", 1e-12},  {"terameter", 1e12},
    {"yard", 0.9144},      {"yoctometer", 1e-24}, {"yottameter", 1e24},
    {"zeptometer", 1e-21}, {"zettameter", 1e21},
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

double sm_unit_space_meters(const char *name)
{
    for (size_t i = 0; name != NULL && i < NUNITS; i++) {
        if (strcmp(name, units[i].name) == 0) {
            return units[i].meters;
        }
    }
    return 0.0;
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
