/* Fuzz target: the numcodecs.lz4 codec's decode through a prepared chain (fuzz_codec.h documents
 * the input header), with an encode/decode round trip of every chunk that decodes. */
#include "fuzz_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_codec_run("numcodecs.lz4", data, size);
    return 0;
}
