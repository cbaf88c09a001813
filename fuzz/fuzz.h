/*
 * fuzz.h — what the libFuzzer harnesses share: the entry point's
 * prototype and the check that turns a broken property into a crash
 * libFuzzer reports (and saves the input of).
 */
#ifndef PC_FUZZ_H
#define PC_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                           \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "property violated: %s (%s:%d)\n", #cond, __FILE__,   \
                    __LINE__);                                                     \
            abort();                                                               \
        }                                                                          \
    } while (0)

/* A big-endian integer of n <= 8 bytes from *p, fewer if the input ends. */
static inline uint64_t fuzz_take(const uint8_t **p, size_t *left, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n && *left > 0; i++, (*p)++, (*left)--)
        v = v << 8 | **p;
    return v;
}

#endif
