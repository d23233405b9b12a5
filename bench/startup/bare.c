/* The baseline of bench/startup: a bare C program that prints one line, as `shardmill --version`
 * does, and exits. Linked like any program of the build (libc only). */
#include <stdio.h>

int main(void)
{
    puts("bare 0.0.0");
    return 0;
}
