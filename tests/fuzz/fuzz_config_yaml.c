/* Fuzz target: the YAML configuration loader (jobs/config_load.c and the files it names; schema in
 * config_schema.c): parse, schema walk, cross-key rules and `--set` overrides, through
 * sm_config_load_string (no file). A configuration that loads is also rendered back to YAML
 * (sm_config_format_yaml). Input: the YAML text, optionally followed by a NUL byte and up to 4
 * `--set` arguments (key.path=value), NUL-separated. */
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "fuzz_common.h"
#include "shardmill/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *part[5];
    size_t len[5];
    size_t n = fuzz_split(data, size, "", 1, part, len, 5);
    /* the --set strings must be NUL-terminated: copy them (the last may run to the input end) */
    char *sets[4] = {NULL, NULL, NULL, NULL};
    unsigned nsets = 0;
    for (size_t i = 1; i < n; i++) {
        char *s = sm_malloc(len[i] + 1);
        if (s == NULL) {
            break;
        }
        memcpy(s, part[i], len[i]);
        s[len[i]] = '\0';
        sets[nsets++] = s;
    }
    struct sm_job_config cfg;
    struct sm_err err = {0};
    if (sm_config_load_string("fuzz.yaml", (const char *)part[0], len[0], (const char *const *)sets,
                              nsets, &cfg, &err) == SM_OK) {
        char *yaml = sm_config_format_yaml(&cfg);
        sm_free(yaml);
        sm_config_destroy(&cfg);
    }
    for (unsigned i = 0; i < nsets; i++) {
        sm_free(sets[i]);
    }
    return 0;
}
