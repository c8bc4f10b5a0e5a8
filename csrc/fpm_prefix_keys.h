/* A request's blocks in the prefix-caching pool (fpm_prefix.c, fpm_prefix_lookup.c, its includers): its
 * holdings slot, the origin keys of its blocks and their lookups by key.
 *
 * A block's key is (origin, block index * groups + group): the origin key of the request's tokens up to the
 * block's end -- the key of its first origin pair (key, upto) with q <= upto, or its own key past them.  The
 * trace readers give the pairs in order of upto, and the block loops walk them with a cursor, one step per
 * breakpoint passed.
 */
#ifndef FPM_PREFIX_KEYS_H
#define FPM_PREFIX_KEYS_H

#include "fpm_internal.h"
#include "fpm_prefix_pool.h"

/* r's holdings, group by group (r holds a slot) */
static inline pc_hold *slot_holds(const engine_t *e, const request_t *r) {
    return &e->pool->hold[(int64_t)r->slot * e->G];
}
static inline pc_hold *hold_at(const engine_t *e, const request_t *r, int gi) { return &slot_holds(e, r)[gi]; }
static inline int32_t *tab_at(const engine_t *e, const request_t *r, int gi) {
    return &e->pool->tab[((int64_t)r->slot * e->G + gi) * e->pool->maxc];
}

/* The first i with q <= upto[i] of n breakpoints in order (n when there is none), by bisection. */
static inline int64_t first_pair_at(const int64_t *upto, int64_t n, int64_t q) {
    /* the range [base, base + len) holds the answer; halved without a branch on the data (a conditional
     * move), so that a request's pairs, met in no order the predictor learns, cost no mispredicted jumps */
    const int64_t *base = upto;
    int64_t len = n;
    while (len > 1) {
        int64_t half = len / 2;
        base = base[half - 1] < q ? base + half : base;
        len -= half;
    }
    return (base - upto) + (len == 1 && *base < q);
}

/* the origin key of r's tokens [0, q): the key of the first pair with q <= upto, else r's own.
 * Pairs in order of upto (the trace readers' breakpoints) are searched by bisection. */
static inline int64_t pc_origin(const engine_t *e, const request_t *r, int64_t q) {
    const fpm_replay_request *in = &e->in[r - e->req];
    int64_t n = in->origin_len;
    if (n == 0) return in->own_key;
    const int64_t *upto = &e->cfg.origin_upto[in->origin_off];
    if (e->pool->origins_sorted) {
        int64_t i = first_pair_at(upto, n, q);
        return i < n ? e->cfg.origin_key[in->origin_off + i] : in->own_key;
    }
    for (int64_t i = 0; i < n; i++)
        if (q <= upto[i]) return e->cfg.origin_key[in->origin_off + i];
    return in->own_key;
}

/* The origin keys of r's blocks in increasing order (origin_next: q never decreases between calls, the
 * cursor starting at the first pair) or in decreasing order (origin_prev: q never increases, the cursor
 * starting past the last pair): one step per breakpoint passed; pairs out of order are searched as
 * pc_origin does. */
typedef struct {
    const engine_t *e;
    const request_t *r;
    const int64_t *upto, *key;
    int64_t n, i, own;
    int sorted;
} origin_cursor;

static inline void origin_start(const engine_t *e, const request_t *r, origin_cursor *oc) {
    const fpm_replay_request *in = &e->in[r - e->req];
    oc->e = e;
    oc->r = r;
    oc->n = in->origin_len;
    oc->upto = oc->n ? &e->cfg.origin_upto[in->origin_off] : NULL;
    oc->key = oc->n ? &e->cfg.origin_key[in->origin_off] : NULL;
    oc->i = 0;
    oc->own = in->own_key;
    oc->sorted = e->pool->origins_sorted;
}

static inline int64_t origin_next(origin_cursor *oc, int64_t q) {
    if (!oc->sorted) return pc_origin(oc->e, oc->r, q);
    while (oc->i < oc->n && q > oc->upto[oc->i]) oc->i++;
    return oc->i < oc->n ? oc->key[oc->i] : oc->own;
}

static inline int64_t origin_prev(origin_cursor *oc, int64_t q) {
    if (!oc->sorted) return pc_origin(oc->e, oc->r, q);
    while (oc->i > 0 && q <= oc->upto[oc->i - 1]) oc->i--;
    return oc->i < oc->n ? oc->key[oc->i] : oc->own;
}

/* ks[j] for j in [j0, j1): the origin keys of blocks j0 ... j1 - 1 (tokens up to (j + 1) * B), a fresh cursor */
static inline void origin_fill(origin_cursor *oc, int64_t B, int64_t j0, int64_t j1, int64_t *ks) {
    if (!oc->sorted) {
        for (int64_t j = j0; j < j1; j++) ks[j] = pc_origin(oc->e, oc->r, (j + 1) * B);
        return;
    }
    int64_t i = first_pair_at(oc->upto, oc->n, (j0 + 1) * B), j = j0;
    while (j < j1) {
        while (i < oc->n && (j + 1) * B > oc->upto[i]) i++;
        if (i == oc->n) break;
        int64_t key = oc->key[i], last = oc->upto[i] / B; /* blocks j with (j + 1) B <= upto: up to upto / B - 1 */
        for (int64_t end = min64(j1, last); j < end; j++) ks[j] = key;
    }
    for (; j < j1; j++) ks[j] = oc->own;
}

static inline void pc_key(const engine_t *e, const request_t *r, int gi, int64_t j, int64_t *ka, int64_t *kb) {
    *ka = pc_origin(e, r, (j + 1) * e->sched_block);
    *kb = j * e->G + gi;
}

static inline int32_t pc_cached(const engine_t *e, const request_t *r, int gi, int64_t j) {
    int64_t ka, kb;
    pc_key(e, r, gi, j, &ka, &kb);
    return pc_lookup_key(e->pool, ka, kb);
}

/* Blocks a windowed group's hit needs below its end (vLLM _contiguous_blocks_for_hit). */
static inline int64_t window_run(const fpm_group *g) { return cdiv64(g->window - 1, g->block); }

#endif
