/* The codec conformance suite (STYLE B11, after tensorstore's codec_test_util.h): every registered
 * codec gets a spec round trip (its spec-style configuration builds, a golden encoding from another
 * implementation decodes, encoding is deterministic), a data round trip (smooth, random and
 * constant content) and corrupt input (truncation, trailing bytes, byte flips: an error, never a
 * crash or a wrong-sized result). A codec joins by adding one row to codec_suite_cases. */
#ifndef SM_TESTS_SUITES_CODEC_SUITE_H
#define SM_TESTS_SUITES_CODEC_SUITE_H

#include <stddef.h>
#include <stdint.h>

#include "shardmill/dtype.h"

/* Capability flags of a case. */
#define CS_FLIPS_DETECTED 0x1u /* every single-byte change of the encoding must be an error */
#define CS_TRAILING_OK 0x2u    /* a byte appended to the encoding may still decode */

struct codec_suite_case {
    const char *codec;  /* the registry name the case covers */
    const char *codecs; /* the whole chain as v3 JSON */
    enum sm_dtype dtype;
    unsigned ndim;
    uint64_t shape[4];
    unsigned caps;
    /* Golden encoding (hex) of the golden content: int16 arange(64) * 3 - 50, shape [64]; NULL if
     * none. Produced by numcodecs 0.11 or by hand from the spec text (see the row). */
    const char *golden;
};

extern const struct codec_suite_case codec_suite_cases[];
extern const size_t codec_suite_ncases;

void codec_suite_spec_roundtrip(const struct codec_suite_case *c);
void codec_suite_data_roundtrip(const struct codec_suite_case *c);
void codec_suite_corrupt_input(const struct codec_suite_case *c);

#endif
