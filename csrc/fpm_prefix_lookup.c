/* The lookup of the prefix-caching pool (spec 06 R-37): the longest hit of a waiting head, group kind by group
 * kind as vLLM's HybridKVCacheCoordinator finds it, its hit blocks kept for the allocation that follows
 * (fpm_prefix.c). */
#include <string.h>

#include "fpm_internal.h"
#include "fpm_prefix_keys.h"
#include "fpm_prefix_pool.h"

/* The longest hit of a chunked-local group at most cap (vLLM ChunkedLocalAttentionManager.find_longest_cache_hit):
 * the chunks before cap's one count as hit without a lookup, then the cached blocks of cap's chunk from its start. */
static int64_t pc_chunk_hit(const engine_t *e, const request_t *r, int gi, int64_t cap) {
    const fpm_group *g = &e->cfg.groups[gi];
    int64_t i = window_first(g, cap), end = cap / g->block;
    while (i < end && pc_cached(e, r, gi, i)) i++;
    return i * g->block;
}

/* The longest hit of a windowed group at most cap (vLLM SlidingWindowManager.find_longest_cache_hit). */
static int64_t pc_window_hit(const engine_t *e, const request_t *r, int gi, int64_t cap) {
    const fpm_group *g = &e->cfg.groups[gi];
    int64_t need = window_run(g), count = 0;
    for (int64_t i = cap / g->block - 1; i >= 0; i--) {
        if (pc_cached(e, r, gi, i)) {
            count++;
            if (count >= need) return (i + count) * g->block;
        } else {
            count = 0;
        }
    }
    return count * g->block;
}

/* The longest hit at most cap for which every Mamba group holds a state (MambaManager.find_longest_cache_hit).
 * A column's origin key is the same for every group: found once per column, walking down. */
static int64_t pc_mamba_hit(const engine_t *e, const request_t *r, int64_t cap) {
    int64_t B = e->sched_block, G = e->G;
    origin_cursor oc;
    origin_start(e, r, &oc);
    oc.i = oc.n; /* walking down */
    for (int64_t i = cap / B - 1; i >= 0; i--) {
        int64_t ka = origin_prev(&oc, (i + 1) * B);
        int all = 1;
        for (int gi = 0; gi < G && all; gi++)
            if (e->cfg.groups[gi].kind == FPM_KIND_MAMBA && !pc_lookup_key(e->pool, ka, i * G + gi)) all = 0;
        if (all) return (i + 1) * B;
    }
    return 0;
}

/* the hit h of a waiting head (hit blocks in the lookup scratch); sets r's
 * junction and *same_step.  vLLM's HybridKVCacheCoordinator: full attention
 * first, then every other group kind until no group shortens the hit. */
int64_t pc_lookup(engine_t *e, request_t *r, int *same_step) {
    struct pc_pool *p = e->pool;
    int64_t B = e->sched_block, maxb = (req_len(r) - 1) / B;
    const int has_full = p->nfull_groups > 0, has_other = p->has_other, first_mamba = p->first_mamba;
    memset(p->hit_lo, 0, (size_t)e->G * sizeof(int64_t));
    memset(p->hit_n, 0, (size_t)e->G * sizeof(int64_t));
    memset(p->hit_m, 0, (size_t)e->G * sizeof(int32_t));
    int64_t cap = maxb * B, longest = -1;
    int first_candidate = 1; /* cap is still vLLM's first candidate, the length less one, which a chunk reads unaligned */
    if (has_full) {
        int64_t j = 0, *ks = p->origin_scratch;
        origin_cursor oc;
        origin_start(e, r, &oc);
        for (int64_t k = 0; k < min64(maxb, PC_AHEAD); k++) ks[k] = origin_next(&oc, (k + 1) * B);
        const int64_t G = e->G, maxc = p->maxc;
        const int32_t *full = p->full_groups, nfull = p->nfull_groups;
        int32_t *hit_tab = p->hit_tab;
        for (; G == 1 && j < maxb; j++) { /* one group, full attention: key (origin, j) */
            if (j + PC_AHEAD < maxb) {
                int64_t k = j + PC_AHEAD;
                ks[k] = origin_next(&oc, (k + 1) * B);
                pc_prefetch_key(p, ks[k], k);
            }
            int32_t b = pc_lookup_key(p, ks[j], j);
            hit_tab[j] = b;
            if (!b) break;
        }
        for (; G > 1 && j < maxb; j++) {
            int all = 1;
            int64_t ka = ks[j];
            if (j + PC_AHEAD < maxb) {
                int64_t k = j + PC_AHEAD;
                ks[k] = origin_next(&oc, (k + 1) * B);
                for (int f = 0; f < nfull; f++) pc_prefetch_key(p, ks[k], k * G + full[f]);
            }
            for (int f = 0; f < nfull && all; f++) {
                int gi = full[f];
                int32_t b = pc_lookup_key(p, ka, j * G + gi);
                if (!b) all = 0;
                hit_tab[gi * maxc + j] = b;
            }
            if (!all) break;
        }
        cap = j * B;
        longest = cap;
        first_candidate = 0;
    }
    if (has_other) {
        int changed = 1;
        while (changed) {
            changed = 0;
            for (int gi = 0; gi < e->G; gi++) {
                int32_t kind = e->cfg.groups[gi].kind;
                int64_t hg;
                if (kind == FPM_KIND_CHUNK)
                    hg = pc_chunk_hit(e, r, gi, first_candidate ? req_len(r) - 1 : cap);
                else if (is_windowed(kind))
                    hg = pc_window_hit(e, r, gi, cap);
                else if (gi == first_mamba)
                    hg = pc_mamba_hit(e, r, cap);
                else
                    continue;
                if (longest < 0) longest = hg;
                if (hg < cap) {
                    cap = hg;
                    changed = 1;
                    first_candidate = 0;
                }
            }
        }
    }
    int64_t h = cap, hka = 0; /* the origin key of the hit's last column, found once a Mamba group needs it */
    int have_hka = 0;
    p->hit_h = h;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        if (g->kind == FPM_KIND_FULL) {
            p->hit_n[gi] = h / B;
        } else if (is_windowed(g->kind)) {
            p->hit_lo[gi] = window_first(g, h);
            p->hit_n[gi] = h / B;
            for (int64_t j = p->hit_lo[gi]; j < h / B; j++) p->hit_tab[gi * p->maxc + j] = pc_cached(e, r, gi, j);
        } else if (g->kind == FPM_KIND_MAMBA && h > 0) {
            if (!have_hka) hka = pc_origin(e, r, h), have_hka = 1;
            p->hit_m[gi] = pc_lookup_key(p, hka, (h / B - 1) * e->G + gi);
        }
    }
    e->info[r - e->req].junction = (e->G >= 2 && longest > h) ? longest : 0;
    *same_step = 0;
    if (h > 0 && !e->cfg.rules.mamba_hits_same_step) {
        for (int gi = 0; gi < e->G; gi++) /* hit_m: the block of the hit's key (h > 0), as found above */
            if (e->cfg.groups[gi].kind == FPM_KIND_MAMBA && pc_cached_this_step(p, p->hit_m[gi])) *same_step = 1;
    }
    return h;
}
