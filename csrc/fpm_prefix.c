/* The prefix-caching pool of the replay (spec 06 ... R-38):
 * vLLM's BlockPool with a free queue of block ids, reference counts, the
 * content key each cached block carries and a key -> blocks map whose lookup
 * returns the block cached first; per request the block table of every group
 * (full attention, windowed attention and convolution, Mamba in align mode,
 * ring).  Mirrors src/fpmcore/replay/prefix.py function by function.
 *
 * Memory grows with the blocks the replay has used, not with the pool: the
 * free queue keeps the never-used blocks as one range ("fresh" blocks,
 * in id order, between the blocks freed to the front and those freed to the
 * back), and the per-block records and the key map grow on demand.
 *
 * The block records, the key map and the free queue: fpm_prefix_pool.h; a request's block keys:
 * fpm_prefix_keys.h; the lookup of a waiting head: fpm_prefix_lookup.c.
 */
#include <stdlib.h>
#include <string.h>

#include "fpm_internal.h"
#include "fpm_prefix_keys.h"
#include "fpm_prefix_pool.h"

const int64_t *pc_free_queue_length(const struct pc_pool *p) { return &p->qlen; }

void pc_free(struct pc_pool *p) {
    if (p == NULL) return;
    if (p->blk) free(p->blk - 1);
    free(p->bka);
    free(p->bkb);
    free(p->bucket);
    free(p->hold);
    free(p->tab);
    free(p->hit_lo);
    free(p->hit_n);
    free(p->hit_tab);
    free(p->hit_m);
    free(p->batch);
    free(p->origin_scratch);
    free(p->full_groups);
    free(p);
}

/* Compact keys when every origin key is in [0, 2^(63 - kshift)) and every block index * groups + group
 * (below maxc * G, maxc covering the longest request's blocks) in [0, 2^kshift). */
static void pc_choose_keys(struct pc_pool *p, const engine_t *e) {
    int64_t kmax = p->maxc > INT64_MAX / max64(p->G, 1) ? INT64_MAX : p->maxc * p->G, top = 0;
    p->kshift = 1;
    while (p->kshift < 62 && ((int64_t)1 << p->kshift) <= kmax) p->kshift++;
    int ok = p->kshift < 62;
    for (int64_t i = 0; i < e->n && ok; i++) {
        if (e->in[i].own_key < 0) ok = 0;
        top = max64(top, e->in[i].own_key);
        if (e->in[i].origin_len <= 0) continue;
        const int64_t *key = &e->cfg.origin_key[e->in[i].origin_off];
        for (int64_t k = 0; k < e->in[i].origin_len; k++) {
            if (key[k] < 0) ok = 0;
            top = max64(top, key[k]);
        }
    }
    p->wide = !ok || top >= ((int64_t)1 << (63 - p->kshift));
}

/* The pool of R-38: blocks 1 ... U in the free queue; slot tables for the requests that hold blocks. */
struct pc_pool *pc_new(const engine_t *e, int64_t maxc) {
    struct pc_pool *p = calloc(1, sizeof(struct pc_pool));
    if (p == NULL) return NULL;
    p->U = e->usable;
    p->G = e->G;
    p->maxc = maxc;
    p->fresh = 1;
    p->nblk = 0;
    pc_choose_keys(p, e);
    p->full_groups = fpm_calloc(e->G, sizeof(int32_t));
    p->first_mamba = -1;
    int nmamba = 0;
    p->lockstep = 1;
    for (int gi = 0; gi < e->G; gi++) {
        int32_t kind = e->cfg.groups[gi].kind;
        if (kind == FPM_KIND_MAMBA) {
            p->mamba = 1;
            nmamba++;
            if (p->first_mamba < 0) p->first_mamba = gi;
            if (e->ckpt_class[gi] != e->ckpt_class[p->first_mamba]) p->lockstep = 0;
        }
        if (is_windowed(kind) || kind == FPM_KIND_MAMBA) p->has_other = 1;
        if (kind == FPM_KIND_FULL && p->full_groups) p->full_groups[p->nfull_groups++] = gi;
    }
    if (nmamba < 2) p->lockstep = 0;
    int64_t first = min64(p->U + 1, 1024);
    pc_block *base = fpm_calloc(first + 1, sizeof(pc_block));
    p->blk = base ? base + 1 : NULL;
    if (p->wide) {
        p->bka = fpm_calloc(first, sizeof(int64_t));
        p->bkb = fpm_calloc(first, sizeof(int64_t));
    }
    int64_t ns = 0;
    if (e->nslots > INT64_MAX / e->G) goto fail;
    ns = e->nslots * e->G;
    p->hold = fpm_calloc(ns, sizeof(pc_hold));
    p->tab = (maxc > 0 && ns > INT64_MAX / maxc) ? NULL : fpm_calloc(ns * maxc, sizeof(int32_t));
    p->hit_lo = fpm_calloc(e->G, sizeof(int64_t));
    p->hit_n = fpm_calloc(e->G, sizeof(int64_t));
    p->hit_tab = (maxc > INT64_MAX / e->G) ? NULL : fpm_calloc(e->G * maxc, sizeof(int32_t));
    p->hit_m = fpm_calloc(e->G, sizeof(int32_t));
    p->batch = fpm_calloc(maxc + PC_MAXM + 2, sizeof(int32_t));
    p->origin_scratch = fpm_calloc(maxc + 1, sizeof(int64_t));
    if (!p->blk || !p->full_groups || (p->wide && (!p->bka || !p->bkb)) || !p->hold || !p->tab ||
        !p->hit_lo || !p->hit_n || !p->hit_tab || !p->hit_m || !p->batch || !p->origin_scratch ||
        !ht_alloc(p, 10))
        goto fail;
    p->nblk = first;
    for (int64_t b = 0; b < first; b++) p->blk[b].key = NOKEY;
    /* the queue: sentinel 0 <-> the fresh range 1 ... U */
    if (p->U > 0) {
        p->blk[0].qn = MARK;
        p->blk[0].qp = MARK;
        p->blk[MARK].qn = 0;
        p->blk[MARK].qp = 0;
    }
    p->qlen = p->U;
    p->origins_sorted = 1;
    for (int64_t i = 0; i < e->n && p->origins_sorted; i++) {
        if (e->in[i].origin_len < 2) continue;
        const int64_t *upto = &e->cfg.origin_upto[e->in[i].origin_off];
        for (int64_t k = 1; k < e->in[i].origin_len; k++)
            if (upto[k] < upto[k - 1]) p->origins_sorted = 0;
    }
    return p;
fail:
    pc_free(p);
    return NULL;
}

/* vLLM _needs_internal_checkpoint with the block-table condition. */
static inline int64_t pc_checkpoint(const engine_t *e, const request_t *r, int gi, int64_t c, int64_t a,
                                    const int64_t *cols, int64_t ncols, int64_t mcols, ckpt_memo *memo) {
    const fpm_group *g = &e->cfg.groups[gi];
    if (!memo_checkpoint(e, r, g, c, a, memo)) return 0;
    int64_t idx = cdiv64(a, g->block) - 2;
    if (idx >= mcols) return 1;
    for (int64_t i = 0; i < ncols; i++)
        if (cols[i] == idx) return 0;
    return 1;
}

/* Mamba columns below this are released at an allocation attempt from c (R-7 step 1). */
static int64_t pc_bound(const engine_t *e, int64_t c, int gi, int64_t mcols) {
    if (c - 1 <= 0) return 0;
    return min64((c - 1) / e->cfg.groups[gi].block, mcols);
}

/* Mamba groups in lockstep.  The Mamba groups of one checkpoint class (ckpt_class: one block size and one
 * checkpoint setting; GLM-5.3-Flash's four) decide alike while they hold alike: the same columns (mcol, mn),
 * the same columns covered (mcols), the same caching progress (ncached).  Every decision of the pool about a
 * Mamba group depends on its holding and on nothing else of the group -- the blocks it needs and holds
 * (pc_need), the states it releases (pc_release_skipped), the blocks it takes (pc_commit), the states it
 * caches (pc_cache_blocks), its fast-path thresholds (pc_thresholds) -- and keeps alike holdings alike.  So
 * the Mamba groups of a slot (pool lockstep: two or more, one class) hold alike from the moment the slot is
 * taken: the only input that differs between them is a lookup's hit, and a lookup finds a Mamba hit in every
 * Mamba group or in none (pc_mamba_hit asks all of them).  Each loop over the groups then decides for the
 * first Mamba group and applies the decision to the others, each with its own blocks and keys, in group order
 * as before: the blocks taken, freed and cached, and their order, are those of deciding group by group.  A
 * model without lockstep is decided group by group.  Builds with FPM_CHECK_INVARIANTS (make -C csrc check)
 * verify the holdings after every change, a lookup's hits included. */
static inline int in_lockstep(const engine_t *e, const request_t *r) { return r->slot >= 0 && e->pool->lockstep; }

#ifdef FPM_CHECK_INVARIANTS
static void check_lockstep(const engine_t *e, const request_t *r) {
    if (!in_lockstep(e, r)) return;
    const pc_hold *hs = slot_holds(e, r), *x = &hs[e->pool->first_mamba];
    for (int gi = e->pool->first_mamba + 1; gi < e->G; gi++) {
        const pc_hold *y = &hs[gi];
        if (e->cfg.groups[gi].kind != FPM_KIND_MAMBA) continue;
        int alike = x->mn == y->mn && x->mcols == y->mcols && x->ncached == y->ncached;
        for (int64_t i = 0; alike && i < x->mn; i++) alike = x->mcol[i] == y->mcol[i];
        if (!alike) abort();
    }
}
#else
static inline void check_lockstep(const engine_t *e, const request_t *r) {
    (void)e;
    (void)r;
}
#endif

void pc_new_step(engine_t *e) { e->pool->stamp = e->k + 1; }


static int64_t pc_evictable(const struct pc_pool *p, const int32_t *bs, int64_t lo, int64_t hi) {
    int64_t n = 0;
    for (int64_t j = lo; j < hi; j++)
        if (bs[j] && pc_ref(p, bs[j]) == 0) n++;
    return n;
}

/* Blocks to take from the free queue and blocks held after, for c -> a; hits != 0: a waiting head
 * with the hits of the last lookup (c is its hit). */
void pc_need(const engine_t *e, const request_t *r, int64_t c, int64_t a, int hits, int64_t *need_out,
             int64_t *held_out) {
    const struct pc_pool *p = e->pool;
    int64_t need = 0, held = 0;
    ckpt_memo memo = CKPT_MEMO_NONE;
    const pc_hold *hs = r->slot >= 0 ? slot_holds(e, r) : NULL;
    const int lock = !hits && in_lockstep(e, r);
    int64_t lock_need = 0, lock_held = 0; /* in lockstep: the first Mamba group's share */
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        const pc_hold *s = hs ? &hs[gi] : NULL;
        if (is_attention(g->kind)) {
            int64_t t, lo;
            if (hits) {
                t = p->hit_n[gi];
                lo = p->hit_lo[gi];
                need += pc_evictable(p, &p->hit_tab[gi * p->maxc], lo, t);
            } else {
                t = s ? s->len : 0;
                lo = s ? s->lo : 0;
                if (is_windowed(g->kind)) lo = max64(lo, min64(window_first(g, c), t));
            }
            need += max64(cdiv64(a, g->block) - t, 0);
            held += max64(cdiv64(a, g->block), t) - lo;
        } else if (g->kind == FPM_KIND_MAMBA) {
            if (lock && gi != p->first_mamba) {
                need += lock_need;
                held += lock_held;
                continue;
            }
            int64_t cols[PC_MAXM] = {0}, ncols = 0, mcols = 0;
            if (hits) {
                if (p->hit_m[gi]) {
                    cols[ncols++] = c / g->block - 1;
                    mcols = c / g->block;
                    if (pc_ref(p, p->hit_m[gi]) == 0) need++;
                }
            } else if (s) {
                int64_t bound = pc_bound(e, c, gi, s->mcols);
                for (int64_t i = 0; i < s->mn; i++)
                    if (s->mcol[i] >= bound) cols[ncols++] = s->mcol[i];
                mcols = s->mcols;
            }
            int64_t d = cdiv64(a, g->block) - mcols;
            int64_t ck = pc_checkpoint(e, r, gi, c, a, cols, ncols, mcols, &memo);
            int64_t nn = d > 0 ? min64(d, 1 + ck) : 0;
            need += nn;
            held += ncols + nn;
            lock_need = nn;
            lock_held = ncols + nn;
        } else {
            if (!s || s->ring == 0) need++;
            held++;
        }
    }
    *need_out = need;
    *held_out = held;
}

/* R-20 in blocks with prefix caching, with the hits of the last lookup */
int64_t pc_input_need(const engine_t *e, const request_t *r, int64_t h) {
    const struct pc_pool *p = e->pool;
    int64_t nt = min64(req_len(r), e->cfg.max_model_len), total = 0;
    ckpt_memo memo = CKPT_MEMO_NONE;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        if (is_attention(g->kind)) {
            int64_t ev = pc_evictable(p, &p->hit_tab[gi * p->maxc], p->hit_lo[gi], p->hit_n[gi]);
            int64_t blocks = cdiv64(nt, g->block);
            if (is_windowed(g->kind)) blocks = min64(blocks, window_admission_blocks(e, g));
            total += max64(blocks - h / g->block, 0) + ev;
        } else if (g->kind == FPM_KIND_MAMBA) {
            int64_t cols[1] = {0}, ncols = 0, ev = 0;
            if (p->hit_m[gi]) {
                cols[ncols++] = h / g->block - 1;
                if (pc_ref(p, p->hit_m[gi]) == 0) ev = 1;
            }
            int64_t ck = pc_checkpoint(e, r, gi, h, nt, cols, ncols, p->hit_m[gi] ? h / g->block : 0, &memo);
            total += max64(min64(cdiv64(nt, g->block) - h / g->block, 1 + ck), 0) + ev;
        } else {
            total += 1;
        }
    }
    return total;
}

/* R-7 step 1: window blocks below first(c) and Mamba states no longer needed, one batch per group; 1 when
 * anything was released */
int pc_release_skipped(engine_t *e, request_t *r, int64_t c) {
    struct pc_pool *p = e->pool;
    int released = 0;
    if (r->slot < 0) return 0;
    int back = e->cfg.rules.free_uncached_to_back;
    pc_hold *hs = slot_holds(e, r);
    const int lock = in_lockstep(e, r);
    uint32_t drop = 0; /* the Mamba states released, bit i for mcol[i] (in lockstep: the first group's) */
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        pc_hold *s = &hs[gi];
        if (is_windowed(g->kind)) {
            int64_t end = min64(window_first(g, c), s->len), nb = 0;
            if (end <= s->lo) continue;
            int32_t *t = tab_at(e, r, gi);
            for (int64_t j = end - 1; j >= s->lo; j--) {
                p->batch[nb++] = t[j];
                t[j] = 0;
            }
            s->lo = end;
            released = 1;
            pc_free_batch(p, p->batch, nb, back);
        } else if (g->kind == FPM_KIND_MAMBA) {
            if (!lock || gi == p->first_mamba) {
                int64_t bound = pc_bound(e, c, gi, s->mcols);
                drop = 0;
                for (int64_t i = 0; i < s->mn; i++)
                    if (s->mcol[i] < bound) drop |= 1u << i;
            }
            if (drop == 0) continue;
            int64_t nb = 0, keep = 0;
            for (int64_t i = s->mn - 1; i >= 0; i--)
                if (drop >> i & 1) p->batch[nb++] = s->mid[i];
            for (int64_t i = 0; i < s->mn; i++) {
                if (!(drop >> i & 1)) {
                    s->mcol[keep] = s->mcol[i];
                    s->mid[keep] = s->mid[i];
                    keep++;
                }
            }
            s->mn = keep;
            released = 1;
            pc_free_batch(p, p->batch, nb, back);
        }
    }
    check_lockstep(e, r);
    return released;
}

/* The blocks of a windowed group kept in the cache: [from[i], ends[i]) for i < n, or (all) every block;
 * none outside [lo, hi).  vLLM reachable_block_mask with prefix_cache_retention_interval 0: the run a hit
 * needs below r's replay boundary and below its junction.  Found once per group and allocation, not per
 * block. */
typedef struct {
    int64_t from[2], ends[2], lo, hi;
    int n, all;
} window_kept;

static window_kept window_retained(const engine_t *e, const request_t *r, const fpm_group *g) {
    window_kept k = {{0, 0}, {0, 0}, 0, INT64_MAX, 0, 1};
    if (e->cfg.rules.dense_retention || g->kind == FPM_KIND_CHUNK) return k; /* a chunk's blocks: vLLM's base mask */
    int64_t need = window_run(g), B = e->sched_block;
    int64_t junction = e->info[r - e->req].junction;
    int64_t ends[2] = {(r->prompt_len - 1) / B * B / g->block, junction / B * B / g->block};
    k.all = 0;
    k.lo = INT64_MAX;
    k.hi = 0;
    for (int i = 0; i < 2; i++) {
        if (i == 1 && junction <= 0) continue;
        k.from[k.n] = ends[i] - need;
        k.ends[k.n] = ends[i];
        k.lo = min64(k.lo, k.from[k.n]);
        k.hi = max64(k.hi, k.ends[k.n]);
        k.n++;
    }
    return k;
}

/* Is block j kept (window_retained)? */
static inline int window_keeps(const window_kept *k, int64_t j) {
    if (k->all) return 1;
    for (int i = 0; i < k->n; i++)
        if (k->from[i] <= j && j < k->ends[i]) return 1;
    return 0;
}

/* vLLM 0.32.0 _cache_partial_tail_block: a request scheduled from its prompt's last cacheable
 * boundary keys its Mamba state there once more, which counts as cached in this step. */
static void pc_recache_boundary_state(engine_t *e, request_t *r, int64_t c) {
    struct pc_pool *p = e->pool;
    int64_t B = e->sched_block;
    if (c <= 0 || c != (r->prompt_len - 1) / B * B) return;
    pc_hold *hs = slot_holds(e, r);
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        if (g->kind != FPM_KIND_MAMBA) continue;
        pc_hold *s = &hs[gi];
        int64_t col = c / g->block - 1;
        for (int64_t i = 0; i < s->mn; i++) {
            if (s->mcol[i] != col) continue;
            int32_t b = s->mid[i];
            int64_t ka, kb;
            pc_key(e, r, gi, col, &ka, &kb);
            if (pc_has_key(p, b, ka, kb)) {
                int32_t x = pc_lookup_key(p, ka, kb);
                if (x) p->blk[x].stamp = p->stamp;
            } else {
                pc_set_key(p, b, ka, kb, 1);
            }
        }
    }
}

/* cache_blocks' loop over the blocks j0 ... j1 - 1 of group gi that became full: their keys prefetched
 * PC_AHEAD blocks ahead, and each block cached under its key, or (windowed groups) each block kept.  Inlined
 * into both callers, so that the full-attention loop (kept NULL) has no kept-block test. */
static inline __attribute__((always_inline)) void pc_cache_block_run(engine_t *e, request_t *r, int gi, int64_t j0,
                                                                     int64_t j1, const window_kept *kept) {
    struct pc_pool *p = e->pool;
    int32_t *t = tab_at(e, r, gi);
    int64_t *ks = p->origin_scratch;
    const int64_t G = e->G;
    origin_cursor oc;
    origin_start(e, r, &oc);
    origin_fill(&oc, e->sched_block, j0, j1, ks);
    for (int64_t j = j0; j < min64(j1, j0 + PC_AHEAD); j++) pc_prefetch_key(p, ks[j], j * G + gi);
    for (int64_t j = j0; j < j1; j++) {
        if (j + PC_AHEAD < j1) pc_prefetch_key(p, ks[j + PC_AHEAD], (j + PC_AHEAD) * G + gi);
        if (kept == NULL || window_keeps(kept, j)) pc_set_key(p, t[j], ks[j], j * G + gi, 0);
    }
}

/* cache_blocks of windowed group gi for its blocks j0 ... nfull - 1 that became full: the kept ones, from the
 * first to the last.  Out of line, so that the full-attention groups' block loop is compiled as if it were alone. */
static __attribute__((noinline)) void pc_cache_window_blocks(engine_t *e, request_t *r, int gi, int64_t j0,
                                                             int64_t nfull) {
    const window_kept kept = window_retained(e, r, &e->cfg.groups[gi]);
    int64_t j1 = min64(nfull, kept.hi);
    j0 = max64(j0, kept.lo);
    if (j0 < j1) pc_cache_block_run(e, r, gi, j0, j1, &kept);
}

/* vLLM cache_blocks of every group after a successful allocation */
static void pc_cache_blocks(engine_t *e, request_t *r, int64_t num_tokens) {
    struct pc_pool *p = e->pool;
    pc_hold *hs = slot_holds(e, r);
    const int lock = in_lockstep(e, r);
    int64_t ncache = 0, cache_i[PC_MAXM] = {0}, cache_ka[PC_MAXM] = {0}; /* a Mamba group's states to cache: their
        index in mcol and their columns' origin key (in lockstep: the first group's) */
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        if (g->kind == FPM_KIND_RING) continue;
        pc_hold *s = &hs[gi];
        int64_t nfull = num_tokens / g->block, start = s->ncached;
        if (start >= nfull) continue;
        if (is_windowed(g->kind)) {
            pc_cache_window_blocks(e, r, gi, max64(start, s->lo), nfull);
        } else if (g->kind == FPM_KIND_FULL) {
            pc_cache_block_run(e, r, gi, max64(start, s->lo), nfull, NULL);
        } else {
            if (!lock || gi == p->first_mamba) {
                int64_t bcols[2];
                int nbc = 0;
                int64_t qs[2] = {r->prompt_len - 1, e->info[r - e->req].junction};
                for (int i = 0; i < 2; i++) {
                    if (qs[i] > 0) {
                        int64_t col = (qs[i] / e->sched_block * e->sched_block) / g->block - 1;
                        if (col >= 0) bcols[nbc++] = col;
                    }
                }
                ncache = 0;
                for (int64_t i = 0; i < s->mn; i++) {
                    int64_t col = s->mcol[i];
                    int hit = 0;
                    for (int k2 = 0; k2 < nbc; k2++)
                        if (bcols[k2] == col) hit = 1;
                    if (start <= col && col < nfull && (hit || e->cfg.rules.dense_retention)) {
                        int64_t kb; /* the first group's; each group's own below */
                        pc_key(e, r, gi, col, &cache_ka[ncache], &kb);
                        cache_i[ncache++] = i;
                    }
                }
            }
            for (int64_t k = 0; k < ncache; k++) {
                int64_t i = cache_i[k];
                pc_set_key(p, s->mid[i], cache_ka[k], s->mcol[i] * e->G + gi, 1);
            }
        }
        s->ncached = nfull;
    }
}

/* The fast-path thresholds of r's slot with prefix caching (as pool_thresholds): an allocation
 * c -> a of a running request from computed c >= from with a <= grow_at and c < shrink_at releases,
 * takes and caches nothing, so pc_release_skipped, pc_need and pc_commit would change nothing:
 *   grow_at: no group needs a new block (attention cdiv(a, B) <= len, Mamba cdiv(a, B) <= mcols,
 *            a ring block held) and no block becomes full (a < (ncached + 1) B);
 *   shrink_at: no windowed block leaves the window (window_first(c) <= lo), no Mamba state falls
 *            below the release bound ((c - 1) / B <= its lowest column), and c is not the prompt's
 *            boundary whose Mamba state vLLM 0.32.0 keys again (pc_recache_boundary_state).
 * Past grow_at, up to the first block a group needs (grow_at + fill_only) and with c < shrink_at, an
 * allocation only caches the blocks that became full (pc_fill_blocks): in a decode, one step in B. */
static void pc_thresholds(engine_t *e, request_t *r, int64_t from) {
    int64_t fill = INT64_MAX, take = INT64_MAX, shrink = INT64_MAX;
    int mamba = 0;
    const pc_hold *hs = slot_holds(e, r);
    const int lock = in_lockstep(e, r);
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        const pc_hold *s = &hs[gi];
        if (g->kind == FPM_KIND_MAMBA && lock && gi != e->pool->first_mamba) continue; /* the same thresholds */
        if (g->kind == FPM_KIND_RING) {
            if (s->ring == 0) take = -1;
            continue;
        }
        fill = min64(fill, (s->ncached + 1) * g->block - 1);
        if (is_attention(g->kind)) {
            take = min64(take, s->len * g->block);
            if (is_windowed(g->kind)) shrink = min64(shrink, window_drop_at(g, s->lo));
        } else {
            mamba = 1;
            take = min64(take, s->mcols * g->block);
            for (int64_t i = 0; i < s->mn; i++) shrink = min64(shrink, (s->mcol[i] + 1) * g->block + 1);
        }
    }
    int64_t boundary = (r->prompt_len - 1) / e->sched_block * e->sched_block;
    if (mamba && e->cfg.rules.mamba_boundary_recached && boundary > 0 && from <= boundary)
        shrink = min64(shrink, boundary);
    r->grow_at = min64(fill, take);
    r->fill_only = (uint32_t)min64(take - r->grow_at, UINT32_MAX);
    r->shrink_at = shrink;
}

/* R-7 step 4 with prefix caching; 0 when out of memory. */
int pc_commit(engine_t *e, request_t *r, int64_t c, int64_t a, int hits) {
    struct pc_pool *p = e->pool;
    ckpt_memo memo = CKPT_MEMO_NONE;
    if (r->slot < 0) {
        r->slot = (int32_t)e->free_slot[--e->nfree_slot];
        memset(slot_holds(e, r), 0, (size_t)e->G * sizeof(pc_hold));
    }
    pc_hold *hs = slot_holds(e, r);
    if (hits) { /* vLLM allocate_new_computed_blocks: every group's hits are touched first */
        for (int gi = 0; gi < e->G; gi++) {
            const fpm_group *g = &e->cfg.groups[gi];
            pc_hold *s = &hs[gi];
            if (is_attention(g->kind)) {
                int32_t *t = tab_at(e, r, gi);
                for (int64_t j = 0; j < p->hit_lo[gi]; j++) t[j] = 0;
                for (int64_t j = p->hit_lo[gi]; j < p->hit_n[gi]; j++) {
                    int32_t b = p->hit_tab[gi * p->maxc + j];
                    pc_touch(p, b);
                    t[j] = b;
                }
                s->lo = p->hit_lo[gi];
                s->len = s->ncached = p->hit_n[gi];
            } else if (g->kind == FPM_KIND_MAMBA && p->hit_m[gi]) {
                pc_touch(p, p->hit_m[gi]);
                s->mcol[0] = c / g->block - 1;
                s->mid[0] = p->hit_m[gi];
                s->mn = 1;
                s->mcols = s->ncached = c / g->block;
            }
        }
    }
    const int lock = in_lockstep(e, r);
    int64_t mreq = 0, md = 0, mck = 0; /* a Mamba group's columns to cover, new columns, checkpoint (in lockstep:
                                          the first group's) */
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        pc_hold *s = &hs[gi];
        if (is_attention(g->kind)) {
            int64_t nn = cdiv64(a, g->block) - s->len;
            if (nn > 0) {
                pc_get_new(p, nn, &tab_at(e, r, gi)[s->len]);
                s->len += nn;
            }
        } else if (g->kind == FPM_KIND_MAMBA) {
            if (!lock || gi == p->first_mamba) {
                mreq = cdiv64(a, g->block);
                md = mreq - s->mcols;
                mck = md > 0 ? pc_checkpoint(e, r, gi, c, a, s->mcol, s->mn, s->mcols, &memo) : 0;
            }
            if (md > 0) {
                int32_t newb[2];
                pc_get_new(p, 1 + mck, newb);
                if (mck) {
                    s->mcol[s->mn] = mreq - 2;
                    s->mid[s->mn] = newb[0];
                    s->mn++;
                }
                s->mcol[s->mn] = mreq - 1;
                s->mid[s->mn] = newb[mck];
                s->mn++;
                s->mcols = mreq;
            }
        } else if (s->ring == 0) {
            s->ring = pc_take_front(p);
        }
    }
    pc_cache_blocks(e, r, min64(a, req_len(r)));
    if (e->cfg.rules.mamba_boundary_recached) pc_recache_boundary_state(e, r, c);
    check_lockstep(e, r);
    pc_thresholds(e, r, a);
    return !p->oom;
}

/* R-7 for a running request's chunk c -> a that only fills blocks (a - grow_at <= fill_only, c < shrink_at):
 * no group releases or takes a block, so the projection, the release and the taking of pc_commit would
 * change nothing and the allocation cannot fail; the blocks that became full are cached.  0 when out of
 * memory. */
int pc_fill_blocks(engine_t *e, request_t *r, int64_t c, int64_t a) {
    pc_cache_blocks(e, r, min64(a, req_len(r)));
    if (e->cfg.rules.mamba_boundary_recached) pc_recache_boundary_state(e, r, c);
    check_lockstep(e, r);
    pc_thresholds(e, r, a);
    return !e->pool->oom;
}

/* one batch per group, highest block first */
void pc_release_all(engine_t *e, request_t *r) {
    struct pc_pool *p = e->pool;
    if (r->slot < 0) return;
    int back = e->cfg.rules.free_uncached_to_back;
    pc_hold *hs = slot_holds(e, r);
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        pc_hold *s = &hs[gi];
        int64_t nb = 0;
        if (is_attention(g->kind)) {
            const int32_t *t = tab_at(e, r, gi);
            for (int64_t j = s->len - 1; j >= s->lo; j--) p->batch[nb++] = t[j];
        } else if (g->kind == FPM_KIND_MAMBA) {
            for (int64_t i = s->mn - 1; i >= 0; i--) p->batch[nb++] = s->mid[i];
        } else if (s->ring) {
            p->batch[nb++] = s->ring;
        }
        if (nb) pc_free_batch(p, p->batch, nb, back);
    }
    e->free_slot[e->nfree_slot++] = r->slot;
    r->slot = -1;
    e->info[r - e->req].junction = 0;
}

int64_t pc_held(const engine_t *e, const request_t *r, int gi) {
    if (r->slot < 0) return 0;
    const pc_hold *s = hold_at(e, r, gi);
    int32_t kind = e->cfg.groups[gi].kind;
    if (is_attention(kind)) return s->len - s->lo;
    if (kind == FPM_KIND_MAMBA) return s->mn;
    return s->ring ? 1 : 0;
}
