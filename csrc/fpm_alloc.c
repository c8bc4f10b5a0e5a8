/* The library's allocations: every size is checked before it is multiplied
 * (FPM_ENOMEM, never a wrapped size), and every block comes zeroed.  A leaf:
 * the pools, the latency model and the engine call it, it calls none of them. */
#if defined(__linux__)
#define _DEFAULT_SOURCE /* madvise */
#include <sys/mman.h>
#include <unistd.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fpm_internal.h"

void *fpm_calloc(int64_t count, size_t size) {
    if (count < 0 || size == 0) return NULL;
    if (count == 0) count = 1;
    if ((uint64_t)count > SIZE_MAX / size) return NULL;
    return calloc((size_t)count, size);
}

void *fpm_calloc_lines(int64_t count, size_t size, void **block) {
    *block = NULL;
    if (count < 0 || size == 0) return NULL;
    if (count == 0) count = 1;
    if ((uint64_t)count > (SIZE_MAX - 64) / size) return NULL;
    /* calloc, not aligned_alloc and memset: a large block comes as fresh pages that stay
     * untouched (and cost no memory) until used */
    char *p = calloc((size_t)count * size + 64, 1);
    if (p == NULL) return NULL;
    *block = p;
    return p + (64 - (uintptr_t)p % 64) % 64;
}

size_t fpm_release_front(void *base, size_t bytes, size_t released) {
#if defined(__linux__) && defined(MADV_DONTNEED)
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return released;
    uintptr_t start = ((uintptr_t)base + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    uintptr_t end = ((uintptr_t)base + bytes) / (uintptr_t)page * (uintptr_t)page;
    if (end <= start || end - start < released + ((size_t)1 << 20)) return released; /* in steps of 1 MiB at least */
    if (madvise((void *)(start + released), end - start - released, MADV_DONTNEED) != 0) return released;
    return end - start;
#else
    (void)base;
    (void)bytes;
    return released;
#endif
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
