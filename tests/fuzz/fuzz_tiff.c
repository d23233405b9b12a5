/* libFuzzer target: a TIFF file as ingest reads it (the TIFF source, engine/source/source_tiff.c
 * over libtiff, opened by sm_source_open as the ingest job opens it). The input
 * is written to a memory file (memfd) and opened as a multi-page TIFF stack; when it opens, every
 * slice of a bounded box is read. libtiff itself is Debian's (not instrumented): what is fuzzed
 * is our use of the geometry, sample type, strip and tile sizes it reports. A refusal must be
 * SM_E_DATA / SM_E_IO / SM_E_NOMEM / SM_E_LIMIT with a message; a read may fail only the same
 * way (a read of uncompressed pages that succeeds counts exactly its box's bytes: they are read in
 * part, issue 33; compressed ones count their strips' stored bytes), and no allocation may follow
 * a size the file declares past the 16 MiB budget. */
#define FUZZ_SOURCE_FORMAT "tiff"
#include "fuzz_source.h"
