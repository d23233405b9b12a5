/* Space units (SPEC §2 "OME-Zarr output"): the UDUNITS-2 names OME-NGFF 0.5 lists for "space"
 * axes, the one table of them, and the common spellings that stand for one ("um", "µm",
 * "micron" -> "micrometer"). jobs/ checks input.unit against it; the sources (TIFF ImageJ and
 * OME-XML) and the convert (a unit read from an OME-Zarr input) map what files say through it.
 * Module core/ (engine/core/core_unit.c). */
#ifndef SM_CORE_UNIT_H
#define SM_CORE_UNIT_H

#include <stddef.h>

/* `s` as the table holds it when it is one of the names (exactly), else NULL. */
const char *sm_unit_space_name(const char *s);

/* The name a common spelling stands for, else NULL (also NULL for a name itself): SI symbols
 * ("um", "µm" with U+00B5 or U+03BC, "mm", "nm", "cm", "m", "km", "pm", "A", "Å", ...), "micron"
 * and "microns", "in", "ft", "yd", "mi", "pc", and a name in other letter case, in the plural or
 * spelled "-metre" ("Micrometers", "millimetres"). */
const char *sm_unit_space_alias(const char *s);

/* A name, or the name an alias stands for; NULL when `s` is neither. */
const char *sm_unit_space_lookup(const char *s);

/* The length of one `name` (a name of the table, as sm_unit_space_name returns it) in meters; 0
 * for anything else. */
double sm_unit_space_meters(const char *name);

/* How many `to` one `from` is (both names of the table; 0 otherwise): a power of ten between
 * metric units (so 2 micrometer is exactly 2000 nanometer), else the ratio of their lengths. */
double sm_unit_space_factor(const char *from, const char *to);

/* The names, comma separated, for messages ("angstrom, attometer, ..."), into buf (cap > 0; cut
 * to fit); returns buf. SM_UNIT_NAMES_MAX holds them all. */
#define SM_UNIT_NAMES_MAX 320
char *sm_unit_space_names(char *buf, size_t cap);

/* Why `s` is no space unit, for messages (into buf, cap > 0; returns buf): "'um' is not a
 * UDUNITS-2 space unit: did you mean micrometer?" when it is an alias, else "... space unit:
 * one of angstrom, ...". SM_UNIT_REFUSAL_MAX holds any (the value cut to 40 bytes). */
#define SM_UNIT_REFUSAL_MAX 400
char *sm_unit_space_refusal(const char *s, char *buf, size_t cap);

#endif
