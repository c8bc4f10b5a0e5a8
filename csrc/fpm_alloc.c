/* The library's allocations: every size is checked before it is multiplied
 * (FPM_ENOMEM, never a wrapped size), and every block comes zeroed.  A leaf:
 * the pools, the latency model and the engine call it, it calls none of them. */
#include <stdlib.h>
#include <string.h>

#include "fpm_internal.h"

void *fpm_calloc(int64_t count, size_t size) {
    if (count < 0 || size == 0) return NULL;
    if (count == 0) count = 1;
    if ((uint64_t)count > SIZE_MAX / size) return NULL;
    return calloc((size_t)count, size);
}

void *fpm_calloc_lines(int64_t count, size_t size) {
    if (count < 0 || size == 0) return NULL;
    if (count == 0) count = 1;
    if ((uint64_t)count > (SIZE_MAX - 63) / size) return NULL;
    size_t bytes = ((size_t)count * size + 63) / 64 * 64;
    void *p = aligned_alloc(64, bytes);
    if (p != NULL) memset(p, 0, bytes);
    return p;
}

int fpm_grow(void **p, int64_t count, int64_t new_count, size_t size) {
    if (new_count <= count) return 1;
    if ((uint64_t)new_count > SIZE_MAX / size) return 0;
    void *q = realloc(*p, (size_t)new_count * size);
    if (q == NULL) return 0;
    memset((char *)q + (size_t)count * size, 0, (size_t)(new_count - count) * size);
    *p = q;
    return 1;
}
