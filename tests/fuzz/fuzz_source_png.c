/* libFuzzer target: a PNG file as ingest reads it (the PNG source, engine/source/source_png.c over
 * libpng; fuzz_source.h): our handling of libpng's errors (longjmp back into the source), of the
 * geometry and bit depth it reports, and of a file that ends early. */
#define FUZZ_SOURCE_FORMAT "png"
#include "fuzz_source.h"
