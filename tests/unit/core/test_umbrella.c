/* Unit test of the umbrella header (issue 36 item 6): engine/include/shardmill/shardmill.h alone
 * declares something of every public header, and lists every header of that folder (counted from
 * the source tree: SM_UMBRELLA_DIR), so a header added there and not to the umbrella fails here. */
#include "shardmill/shardmill.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

/* One name of each public header, reached through the umbrella alone. */
static void test_names(void **state)
{
    (void)state;
    const void *names[] = {
        (const void *)sm_malloc,                /* alloc.h */
        (const void *)sm_array_open,            /* array.h */
        (const void *)sm_box_copy,              /* box.h */
        (const void *)sm_buf_reserve,           /* buf.h */
        (const void *)sm_clock_ns,              /* clock.h */
        (const void *)sm_scratch_new,           /* codec.h */
        (const void *)sm_crc32c,                /* crc32c.h */
        (const void *)sm_dtype_size,            /* dtype.h */
        (const void *)sm_export_hdf5_available, /* export.h */
        (const void *)sm_library_load,          /* library.h */
        (const void *)sm_meta_parse_v3,         /* meta.h */
        (const void *)sm_par_init,              /* par.h */
        (const void *)sm_path_resolve,          /* path.h */
        (const void *)sm_run_norm_json,         /* pipeline.h */
        (const void *)sm_source_new,            /* source.h */
        (const void *)sm_hist_default,          /* stats.h */
        (const void *)sm_err_clear,             /* status.h */
        (const void *)sm_strv_free,             /* store.h */
        (const void *)sm_threads_warm,          /* threads.h */
        (const void *)sm_tiling_init,           /* tile.h */
        (const void *)sm_unit_space_name,       /* unit.h */
        (const void *)sm_url_redact,            /* url.h */
        (const void *)sm_output_chunk_v2,       /* write.h */
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        assert_non_null(names[i]);
    }
    const sm_progress_fn fn = NULL; /* progress.h: a type only */
    assert_null(fn);
#ifndef _POSIX_C_SOURCE /* sm_config.h */
    fail_msg("sm_config.h not reached");
#endif
}

/* Every header of engine/include/shardmill/ but the umbrella itself is named in it. */
static void test_every_header(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof(path), "%s/shardmill.h", SM_UMBRELLA_DIR);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[8192];
    const size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    DIR *d = opendir(SM_UMBRELLA_DIR);
    assert_non_null(d);
    int headers = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        const size_t len = strlen(de->d_name);
        if (len < 3 || strcmp(de->d_name + len - 2, ".h") != 0 ||
            strcmp(de->d_name, "shardmill.h") == 0) {
            continue;
        }
        char line[300];
        snprintf(line, sizeof(line), "#include \"shardmill/%s\"", de->d_name);
        if (strstr(text, line) == NULL) {
            fail_msg("shardmill.h does not include %s", de->d_name);
        }
        headers++;
    }
    closedir(d);
    assert_true(headers >= 25);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_every_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
