/* A reference case of bench/startup: the bare program plus what every http(s)/s3 run of shardmill
 * pays once, loading libcurl as the HTTP store does (engine/store/store_http.c: dlopen of
 * libcurl.so.4 with lazy binding, then curl_global_init). Its difference to the bare program is
 * that fixed cost (W1's `open` stage, docs/BENCHMARKS.md). No curl headers: one entry point by
 * dlsym. Exit 1 when libcurl cannot be loaded. */
#include <dlfcn.h>
#include <stdio.h>

int main(void)
{
    void *lib = dlopen("libcurl.so.4", RTLD_LAZY | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "curl_load: %s\n", dlerror());
        return 1;
    }
    int (*global_init)(long) = (int (*)(long))dlsym(lib, "curl_global_init");
    if (global_init == NULL || global_init(3L) != 0) { /* CURL_GLOBAL_DEFAULT */
        fprintf(stderr, "curl_load: curl_global_init failed\n");
        return 1;
    }
    puts("curl_load 0.0.0");
    return 0;
}
