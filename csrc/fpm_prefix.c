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
 * Layout, for the per-block work of a long replay (every computed prompt block
 * is cached under its key and every block taken from the free queue drops the
 * key it had, millions of each on a production trace):
 *  - a block's free-queue links, reference count, key word, link in the key
 *    map and Mamba stamp share one 32-byte record (pc_block), so taking,
 *    evicting and caching a block touch one cache line of it instead of seven
 *    arrays;
 *  - the key map is a bucket array of block ids, each bucket a list of the
 *    keyed blocks whose key hashes there, linked through the blocks' records,
 *    blocks of one key in caching order (a block is appended at its bucket's
 *    end), so a lookup returns the first of them, the block cached first.
 *    Dropping a key unlinks its block from a list that is about one block
 *    long: no probe sequence, no backward-shift deletion;
 *  - a key (origin, block index * groups + group) is packed into one 63-bit
 *    word when every origin key the replay can meet and every block index fit
 *    (compact keys, decided once in pc_new); otherwise the word is the pair's
 *    hash and the pair itself, kept in per-block side arrays, is compared too
 *    (wide keys);
 *  - the step in which a Mamba state was last cached under a key is kept by
 *    the key's first block and handed to the next one of the key when it drops
 *    the key;
 *  - the fresh range's place in the free queue is record -1, so the queue's
 *    links need no test for it.
 * None of this changes which block a lookup returns or the queue's order: the
 * results are prefix.py's.
 */
#include <stdlib.h>
#include <string.h>

#include "fpm_internal.h"

#define PC_MAXM 4    /* Mamba blocks one request holds in one group: running, transient, checkpoint */
#define MARK (-1)    /* the fresh range's place in the free queue: record -1 */
#define NOKEY UINT64_MAX /* the key word of a block without a key (no key packs or hashes to it) */

typedef struct {
    int32_t qn, qp; /* free queue links (while the block is free) */
    int32_t ref;    /* reference count */
    int32_t hnext;  /* the next block of its key map bucket */
    uint64_t key;   /* its key word, NOKEY: none */
    int64_t stamp;  /* the first block of a key: step (+1) in which a Mamba state was cached under the key */
} pc_block;

typedef struct {
    int64_t lo, len;   /* attention: table entries [lo, len) are blocks, [0, lo) null */
    int64_t ncached;   /* cache_blocks progress (vLLM num_cached_block) */
    int64_t mn, mcols; /* Mamba: entries held and block columns covered */
    int64_t mcol[PC_MAXM];
    int32_t mid[PC_MAXM];
    int32_t ring;
} pc_hold;

struct pc_pool {
    int64_t U;          /* usable blocks, ids 1 ... U */
    int64_t fresh;      /* next never-used id (fresh ids fresh ... U are free, in order) */
    int64_t nblk;       /* per-block records cover ids 0 ... nblk - 1 */
    pc_block *blk;      /* blk[-1] ... blk[nblk - 1]: blk[-1] is the fresh range's place (MARK) */
    int64_t *bka, *bkb; /* wide keys only: each block's key pair */
    int wide;           /* keys do not pack into one word */
    int mamba;          /* a Mamba group: keys carry stamps */
    int kshift;         /* compact keys: origin << kshift | block index * groups + group */
    int64_t qlen;       /* free queue length, fresh blocks included */
    int32_t *bucket;    /* the key map: first block of each bucket (0: empty) */
    int hbits;          /* 2^hbits buckets */
    int64_t hcount;     /* blocks with a key */
    int64_t hgrow;      /* hcount at which an insertion first doubles the buckets (load 1/2) */
    int64_t stamp;
    int oom;
    int64_t maxc, G;
    pc_hold *hold; /* nslots * G */
    int32_t *tab;  /* nslots * G * maxc */
    /* the last lookup */
    int64_t hit_h;
    int64_t *hit_lo, *hit_n; /* per group: hit blocks are hit_tab[g][hit_lo .. hit_n) */
    int32_t *hit_tab;
    int32_t *hit_m;
    int32_t *batch;
    int64_t *origin_scratch; /* the origin keys of a request's blocks, for the block loops (maxc) */
    int origins_sorted;      /* every request's origin pairs in order of upto */
};

/* ------------------------------------------------------------ storage */

static int pc_grow_blocks(struct pc_pool *p, int64_t id) {
    if (id < p->nblk) return 1;
    int64_t n = p->nblk;
    while (n <= id) n = n * 2;
    if (n > p->U + 1) n = p->U + 1;
    int64_t old = p->nblk;
    void *base = p->blk - 1;
    if (!fpm_grow(&base, old + 1, n + 1, sizeof(pc_block))) {
        p->oom = 1;
        return 0;
    }
    p->blk = (pc_block *)base + 1;
    for (int64_t b = old; b < n; b++) p->blk[b].key = NOKEY;
    if (p->wide && (!fpm_grow((void **)&p->bka, old, n, sizeof(int64_t)) ||
                    !fpm_grow((void **)&p->bkb, old, n, sizeof(int64_t)))) {
        p->oom = 1;
        return 0;
    }
    p->nblk = n;
    return 1;
}

static uint64_t pc_hash(int64_t a, int64_t b) {
    uint64_t x = (uint64_t)a * 0x9E3779B97F4A7C15ULL ^ ((uint64_t)b + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 29;
    return x;
}

/* The key word of (a, b): packed, or (wide keys) the pair's hash; below 2^63, never NOKEY. */
static inline uint64_t pc_word(const struct pc_pool *p, int64_t a, int64_t b) {
    return p->wide ? pc_hash(a, b) >> 1 : ((uint64_t)a << p->kshift) | (uint64_t)b;
}

/* The bucket of a key word (Fibonacci hashing: the product's top bits). */
static inline uint64_t ht_home(const struct pc_pool *p, uint64_t w) {
    return (w * 0x9E3779B97F4A7C15ULL) >> (64 - p->hbits);
}

/* Does block x carry key (a, b) of word w? */
static inline int pc_match(const struct pc_pool *p, int32_t x, uint64_t w, int64_t a, int64_t b) {
    return p->blk[x].key == w && (!p->wide || (p->bka[x] == a && p->bkb[x] == b));
}

/* Do blocks x and y carry one key? */
static inline int pc_same_key(const struct pc_pool *p, int32_t x, int32_t y) {
    return p->blk[x].key == p->blk[y].key && (!p->wide || (p->bka[x] == p->bka[y] && p->bkb[x] == p->bkb[y]));
}

/* 2^bits buckets, the keyed blocks relinked bucket by bucket in list order (a key's blocks keep their order) */
static int ht_alloc(struct pc_pool *p, int bits) {
    int64_t cap = (int64_t)1 << bits;
    int32_t *t = fpm_calloc(cap, sizeof(int32_t)), *tail = p->bucket ? fpm_calloc(cap, sizeof(int32_t)) : NULL;
    if (t == NULL || (p->bucket && tail == NULL)) {
        free(t);
        free(tail);
        return 0;
    }
    int32_t *old = p->bucket;
    int64_t oldcap = old ? (int64_t)1 << p->hbits : 0;
    p->bucket = t;
    p->hbits = bits;
    p->hgrow = cap / 2;
    for (int64_t i = 0; i < oldcap; i++) {
        for (int32_t x = old[i], nx; x; x = nx) {
            nx = p->blk[x].hnext;
            uint64_t h = ht_home(p, p->blk[x].key);
            p->blk[x].hnext = 0;
            if (tail[h])
                p->blk[tail[h]].hnext = x;
            else
                t[h] = x;
            tail[h] = x;
        }
    }
    free(old);
    free(tail);
    return 1;
}

/* the first block cached under key (a, b) that still has it, or 0 */
static int32_t pc_lookup_key(const struct pc_pool *p, int64_t a, int64_t b) {
    uint64_t w = pc_word(p, a, b);
    int32_t x = p->bucket[ht_home(p, w)];
    while (x && !pc_match(p, x, w, a, b)) x = p->blk[x].hnext;
    return x;
}

/* drop the key of block b, which has one: b leaves its bucket's list; the next block of its key, if any,
 * becomes the key's first and takes the Mamba stamp */
static void pc_evict_key(struct pc_pool *p, int32_t b) {
    pc_block *bl = &p->blk[b];
    int32_t *link = &p->bucket[ht_home(p, bl->key)];
    int first = 1;
    while (*link != b) {
        if (pc_same_key(p, *link, b)) first = 0;
        link = &p->blk[*link].hnext;
    }
    *link = bl->hnext;
    if (first && p->mamba) {
        for (int32_t x = bl->hnext; x; x = p->blk[x].hnext) {
            if (pc_same_key(p, x, b)) {
                p->blk[x].stamp = bl->stamp;
                break;
            }
        }
    }
    bl->hnext = 0;
    bl->key = NOKEY;
    p->hcount--;
}

/* drop block b's key (eviction), if it has one */
static inline void pc_evict(struct pc_pool *p, int32_t b) {
    if (p->blk[b].key != NOKEY) pc_evict_key(p, b);
}

/* does block b carry key (a, kb)? */
static int pc_has_key(const struct pc_pool *p, int32_t b, int64_t a, int64_t kb) {
    return pc_match(p, b, pc_word(p, a, kb), a, kb);
}

/* cache block b under key (a, kb), after the blocks cached under it before; a Mamba state records the step */
static inline __attribute__((always_inline)) void pc_set_key(struct pc_pool *p, int32_t b, int64_t a, int64_t kb,
                                                             int mamba) {
    if (b == 0) return;
    pc_evict(p, b);
    if (p->hcount >= p->hgrow) {
        if (!ht_alloc(p, p->hbits + 1)) p->oom = 1;
        if ((p->hcount + 1) * 4 > ((int64_t)3 << p->hbits)) return; /* out of memory: the key is not cached */
    }
    uint64_t w = pc_word(p, a, kb);
    int32_t *link = &p->bucket[ht_home(p, w)], first = 0;
    while (*link) {
        if (!first && pc_match(p, *link, w, a, kb)) first = *link;
        link = &p->blk[*link].hnext;
    }
    *link = b;
    pc_block *bl = &p->blk[b];
    bl->key = w;
    bl->hnext = 0;
    if (p->wide) {
        p->bka[b] = a;
        p->bkb[b] = kb;
    }
    p->hcount++;
    if (!first) {
        first = b;
        bl->stamp = 0;
    }
    if (mamba) p->blk[first].stamp = p->stamp;
}

/* The block loops ask for a key's bucket PC_AHEAD blocks before they need it: a lookup or an insertion
 * starts with a cache miss in a map larger than the cache, which the loop's work then overlaps. */
#define PC_AHEAD 8
static inline void pc_prefetch_key(const struct pc_pool *p, int64_t a, int64_t b) {
    __builtin_prefetch(&p->bucket[ht_home(p, pc_word(p, a, b))]);
}

/* Was a Mamba state cached under key (a, b) in this step? */
static int pc_cached_this_step(const struct pc_pool *p, int64_t a, int64_t b) {
    int32_t x = pc_lookup_key(p, a, b);
    return x && p->blk[x].stamp == p->stamp;
}

/* ------------------------------------------------------------ free queue */

static inline void q_unlink(struct pc_pool *p, int32_t b) {
    int32_t pr = p->blk[b].qp, nx = p->blk[b].qn;
    p->blk[pr].qn = nx;
    p->blk[nx].qp = pr;
}

static inline void q_insert_after(struct pc_pool *p, int32_t pr, int32_t b) {
    int32_t nx = p->blk[pr].qn;
    p->blk[pr].qn = b;
    p->blk[b].qp = pr;
    p->blk[b].qn = nx;
    p->blk[nx].qp = b;
}

/* get_new_blocks: the block at the front of the queue, its key evicted (0 when out of memory) */
static inline __attribute__((always_inline)) int32_t pc_take_front(struct pc_pool *p) {
    int32_t b = p->blk[0].qn;
    if (b == MARK) {
        if (!pc_grow_blocks(p, p->fresh)) return 0;
        b = (int32_t)p->fresh++;
        if (p->fresh > p->U) q_unlink(p, MARK);
    } else {
        q_unlink(p, b);
        pc_evict(p, b);
        int32_t nx = p->blk[0].qn; /* the next block taken, most likely */
        if (nx > 0) __builtin_prefetch(&p->blk[nx], 1);
    }
    p->qlen--;
    p->blk[b].ref = 1;
    return b;
}

static void pc_get_new(struct pc_pool *p, int64_t n, int32_t *out) {
    for (int64_t i = 0; i < n; i++) out[i] = pc_take_front(p);
}

/* free_blocks: cached blocks to the back in batch order, the others to the front */
static void pc_free_batch(struct pc_pool *p, int32_t *bs, int64_t n, int uncached_to_back) {
    int32_t front = 0;
    int64_t nback = 0; /* the blocks for the back, in batch order, gathered in bs[0 .. nback) (a batch's blocks are
                          distinct and the front insertions change no key, so this is the second pass's choice) */
    for (int64_t i = 0; i < n; i++) {
        int32_t b = bs[i];
        if (b == 0) continue;
        if (--p->blk[b].ref != 0) continue;
        if (p->blk[b].key == NOKEY && !uncached_to_back) {
            q_insert_after(p, front, b);
            front = b;
        } else {
            bs[nback++] = b;
        }
        p->qlen++;
    }
    for (int64_t i = 0; i < nback; i++) q_insert_after(p, p->blk[0].qp, bs[i]);
}

static void pc_touch(struct pc_pool *p, int32_t b) {
    if (b == 0) return;
    if (p->blk[b].ref == 0) {
        q_unlink(p, b);
        p->qlen--;
    }
    p->blk[b].ref++;
}

static inline int32_t pc_ref(const struct pc_pool *p, int32_t b) { return p->blk[b].ref; }

int64_t pc_free_count(const struct pc_pool *p) { return p->qlen; }

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
    for (int gi = 0; gi < e->G; gi++)
        if (e->cfg.groups[gi].kind == FPM_KIND_MAMBA) p->mamba = 1;
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
    if (!p->blk || (p->wide && (!p->bka || !p->bkb)) || !p->hold || !p->tab ||
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

/* ---- engine side of the prefix-caching pool ---- */

static pc_hold *hold_at(const engine_t *e, const request_t *r, int gi) {
    return &e->pool->hold[(int64_t)r->slot * e->G + gi];
}
static int32_t *tab_at(const engine_t *e, const request_t *r, int gi) {
    return &e->pool->tab[((int64_t)r->slot * e->G + gi) * e->pool->maxc];
}

/* the origin key of r's tokens [0, q): the key of the first pair with q <= upto, else r's own.
 * Pairs in order of upto (the trace readers' breakpoints) are searched by bisection. */
static int64_t pc_origin(const engine_t *e, const request_t *r, int64_t q) {
    const fpm_replay_request *in = &e->in[r - e->req];
    int64_t n = in->origin_len;
    if (n == 0) return in->own_key;
    const int64_t *upto = &e->cfg.origin_upto[in->origin_off];
    if (e->pool->origins_sorted) {
        int64_t lo = 0, hi = n; /* the first i with q <= upto[i] */
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (q <= upto[mid])
                hi = mid;
            else
                lo = mid + 1;
        }
        return lo < n ? e->cfg.origin_key[in->origin_off + lo] : in->own_key;
    }
    for (int64_t i = 0; i < n; i++)
        if (q <= upto[i]) return e->cfg.origin_key[in->origin_off + i];
    return in->own_key;
}

/* The origin keys of r's blocks in increasing order (q never decreases between calls): a cursor
 * over r's pairs, one step per breakpoint passed; pairs out of order are searched as pc_origin does. */
typedef struct {
    const engine_t *e;
    const request_t *r;
    const int64_t *upto, *key;
    int64_t n, i, own;
    int sorted;
} origin_cursor;

static void origin_start(const engine_t *e, const request_t *r, origin_cursor *oc) {
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

/* ks[j] for j in [j0, j1): the origin keys of blocks j0 ... j1 - 1 (tokens up to (j + 1) * B), a fresh cursor */
static void origin_fill(origin_cursor *oc, int64_t B, int64_t j0, int64_t j1, int64_t *ks) {
    if (!oc->sorted) {
        for (int64_t j = j0; j < j1; j++) ks[j] = pc_origin(oc->e, oc->r, (j + 1) * B);
        return;
    }
    int64_t i = 0, j = j0;
    while (j < j1) {
        while (i < oc->n && (j + 1) * B > oc->upto[i]) i++;
        if (i == oc->n) break;
        int64_t key = oc->key[i], last = oc->upto[i] / B; /* blocks j with (j + 1) B <= upto: up to upto / B - 1 */
        for (int64_t end = min64(j1, last); j < end; j++) ks[j] = key;
    }
    for (; j < j1; j++) ks[j] = oc->own;
}

static void pc_key(const engine_t *e, const request_t *r, int gi, int64_t j, int64_t *ka, int64_t *kb) {
    *ka = pc_origin(e, r, (j + 1) * e->sched_block);
    *kb = j * e->G + gi;
}

static int32_t pc_cached(const engine_t *e, const request_t *r, int gi, int64_t j) {
    int64_t ka, kb;
    pc_key(e, r, gi, j, &ka, &kb);
    return pc_lookup_key(e->pool, ka, kb);
}

/* Blocks a windowed group's hit needs below its end (vLLM _contiguous_blocks_for_hit). */
static int64_t window_run(const fpm_group *g) { return cdiv64(g->window - 1, g->block); }

/* vLLM _needs_internal_checkpoint with the block-table condition. */
static int64_t pc_checkpoint(const engine_t *e, const request_t *r, int gi, int64_t c, int64_t a, const int64_t *cols,
                             int64_t ncols, int64_t mcols) {
    const fpm_group *g = &e->cfg.groups[gi];
    if (!mamba_checkpoint(e, r, g, c, a)) return 0;
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

void pc_new_step(engine_t *e) { e->pool->stamp = e->k + 1; }

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

/* The longest hit at most cap for which every Mamba group holds a state (MambaManager.find_longest_cache_hit). */
static int64_t pc_mamba_hit(const engine_t *e, const request_t *r, int64_t cap) {
    int64_t B = e->sched_block;
    for (int64_t i = cap / B - 1; i >= 0; i--) {
        int all = 1;
        for (int gi = 0; gi < e->G && all; gi++)
            if (e->cfg.groups[gi].kind == FPM_KIND_MAMBA && !pc_cached(e, r, gi, i)) all = 0;
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
    int has_full = 0, has_other = 0, first_mamba = -1;
    for (int gi = 0; gi < e->G; gi++) {
        int32_t kind = e->cfg.groups[gi].kind;
        p->hit_lo[gi] = p->hit_n[gi] = 0;
        p->hit_m[gi] = 0;
        if (kind == FPM_KIND_FULL) has_full = 1;
        if (is_windowed(kind) || kind == FPM_KIND_MAMBA) has_other = 1;
        if (kind == FPM_KIND_MAMBA && first_mamba < 0) first_mamba = gi;
    }
    int64_t cap = maxb * B, longest = -1;
    int first_candidate = 1; /* cap is still vLLM's first candidate, the length less one, which a chunk reads unaligned */
    if (has_full) {
        int64_t j = 0, *ks = p->origin_scratch;
        origin_cursor oc;
        origin_start(e, r, &oc);
        for (int64_t k = 0; k < min64(maxb, PC_AHEAD); k++) ks[k] = origin_next(&oc, (k + 1) * B);
        for (; j < maxb; j++) {
            int all = 1;
            int64_t ka = ks[j];
            if (j + PC_AHEAD < maxb) {
                int64_t k = j + PC_AHEAD;
                ks[k] = origin_next(&oc, (k + 1) * B);
                for (int gi = 0; gi < e->G; gi++)
                    if (e->cfg.groups[gi].kind == FPM_KIND_FULL) pc_prefetch_key(p, ks[k], k * e->G + gi);
            }
            for (int gi = 0; gi < e->G && all; gi++) {
                if (e->cfg.groups[gi].kind != FPM_KIND_FULL) continue;
                int32_t b = pc_lookup_key(p, ka, j * e->G + gi);
                if (!b) all = 0;
                p->hit_tab[gi * p->maxc + j] = b;
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
    int64_t h = cap;
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
            p->hit_m[gi] = pc_cached(e, r, gi, h / B - 1);
        }
    }
    r->junction = (e->G >= 2 && longest > h) ? longest : 0;
    *same_step = 0;
    if (h > 0 && !e->cfg.rules.mamba_hits_same_step) {
        for (int gi = 0; gi < e->G; gi++) {
            if (e->cfg.groups[gi].kind != FPM_KIND_MAMBA) continue;
            int64_t ka, kb;
            pc_key(e, r, gi, h / B - 1, &ka, &kb);
            if (pc_cached_this_step(p, ka, kb)) *same_step = 1;
        }
    }
    return h;
}

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
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        const pc_hold *s = r->slot >= 0 ? hold_at(e, r, gi) : NULL;
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
            int64_t cols[PC_MAXM], ncols = 0, mcols = 0;
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
            int64_t ck = pc_checkpoint(e, r, gi, c, a, cols, ncols, mcols);
            int64_t nn = d > 0 ? min64(d, 1 + ck) : 0;
            need += nn;
            held += ncols + nn;
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
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        if (is_attention(g->kind)) {
            int64_t ev = pc_evictable(p, &p->hit_tab[gi * p->maxc], p->hit_lo[gi], p->hit_n[gi]);
            int64_t blocks = cdiv64(nt, g->block);
            if (is_windowed(g->kind)) blocks = min64(blocks, window_admission_blocks(e, g));
            total += max64(blocks - h / g->block, 0) + ev;
        } else if (g->kind == FPM_KIND_MAMBA) {
            int64_t cols[1], ncols = 0, ev = 0;
            if (p->hit_m[gi]) {
                cols[ncols++] = h / g->block - 1;
                if (pc_ref(p, p->hit_m[gi]) == 0) ev = 1;
            }
            int64_t ck = pc_checkpoint(e, r, gi, h, nt, cols, ncols, p->hit_m[gi] ? h / g->block : 0);
            total += max64(min64(cdiv64(nt, g->block) - h / g->block, 1 + ck), 0) + ev;
        } else {
            total += 1;
        }
    }
    return total;
}

/* R-7 step 1: window blocks below first(c) and Mamba states no longer needed, one batch per group */
void pc_release_skipped(engine_t *e, request_t *r, int64_t c) {
    struct pc_pool *p = e->pool;
    if (r->slot < 0) return;
    int back = e->cfg.rules.free_uncached_to_back;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        pc_hold *s = hold_at(e, r, gi);
        if (is_windowed(g->kind)) {
            int64_t end = min64(window_first(g, c), s->len), nb = 0;
            if (end <= s->lo) continue;
            int32_t *t = tab_at(e, r, gi);
            for (int64_t j = end - 1; j >= s->lo; j--) {
                p->batch[nb++] = t[j];
                t[j] = 0;
            }
            s->lo = end;
            pc_free_batch(p, p->batch, nb, back);
        } else if (g->kind == FPM_KIND_MAMBA) {
            int64_t bound = pc_bound(e, c, gi, s->mcols);
            int64_t nb = 0, keep = 0;
            for (int64_t i = s->mn - 1; i >= 0; i--)
                if (s->mcol[i] < bound) p->batch[nb++] = s->mid[i];
            if (nb == 0) continue;
            for (int64_t i = 0; i < s->mn; i++) {
                if (s->mcol[i] >= bound) {
                    s->mcol[keep] = s->mcol[i];
                    s->mid[keep] = s->mid[i];
                    keep++;
                }
            }
            s->mn = keep;
            pc_free_batch(p, p->batch, nb, back);
        }
    }
}

/* Is block j of a windowed group kept in the cache?  vLLM reachable_block_mask with
 * prefix_cache_retention_interval 0: the run a hit needs below r's replay boundary and its junction. */
static int window_retained(const engine_t *e, const request_t *r, const fpm_group *g, int64_t j) {
    if (e->cfg.rules.dense_retention || g->kind == FPM_KIND_CHUNK) return 1; /* a chunk's blocks: vLLM's base mask */
    int64_t need = window_run(g), B = e->sched_block;
    int64_t ends[2] = {(r->prompt_len - 1) / B * B / g->block, r->junction / B * B / g->block};
    for (int i = 0; i < 2; i++) {
        if (i == 1 && r->junction <= 0) continue;
        if (ends[i] - need <= j && j < ends[i]) return 1;
    }
    return 0;
}

/* vLLM 0.32.0 _cache_partial_tail_block: a request scheduled from its prompt's last cacheable
 * boundary keys its Mamba state there once more, which counts as cached in this step. */
static void pc_recache_boundary_state(engine_t *e, request_t *r, int64_t c) {
    struct pc_pool *p = e->pool;
    int64_t B = e->sched_block;
    if (c <= 0 || c != (r->prompt_len - 1) / B * B) return;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        if (g->kind != FPM_KIND_MAMBA) continue;
        pc_hold *s = hold_at(e, r, gi);
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

/* vLLM cache_blocks of every group after a successful allocation */
static void pc_cache_blocks(engine_t *e, request_t *r, int64_t num_tokens) {
    struct pc_pool *p = e->pool;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        if (g->kind == FPM_KIND_RING) continue;
        pc_hold *s = hold_at(e, r, gi);
        int64_t nfull = num_tokens / g->block, start = s->ncached;
        if (start >= nfull) continue;
        if (is_attention(g->kind)) {
            int32_t *t = tab_at(e, r, gi);
            int64_t j0 = max64(start, s->lo), *ks = p->origin_scratch;
            origin_cursor oc;
            origin_start(e, r, &oc);
            origin_fill(&oc, e->sched_block, j0, nfull, ks);
            for (int64_t j = j0; j < min64(nfull, j0 + PC_AHEAD); j++) pc_prefetch_key(p, ks[j], j * e->G + gi);
            for (int64_t j = j0; j < nfull; j++) {
                if (j + PC_AHEAD < nfull) pc_prefetch_key(p, ks[j + PC_AHEAD], (j + PC_AHEAD) * e->G + gi);
                if (g->kind != FPM_KIND_FULL && !window_retained(e, r, g, j)) continue;
                pc_set_key(p, t[j], ks[j], j * e->G + gi, 0);
            }
        } else {
            int64_t bcols[2];
            int nbc = 0;
            int64_t qs[2] = {r->prompt_len - 1, r->junction};
            for (int i = 0; i < 2; i++) {
                if (qs[i] > 0) {
                    int64_t col = (qs[i] / e->sched_block * e->sched_block) / g->block - 1;
                    if (col >= 0) bcols[nbc++] = col;
                }
            }
            for (int64_t i = 0; i < s->mn; i++) {
                int64_t col = s->mcol[i];
                int hit = 0;
                for (int k2 = 0; k2 < nbc; k2++)
                    if (bcols[k2] == col) hit = 1;
                if (start <= col && col < nfull && (hit || e->cfg.rules.dense_retention)) {
                    int64_t ka, kb;
                    pc_key(e, r, gi, col, &ka, &kb);
                    pc_set_key(p, s->mid[i], ka, kb, 1);
                }
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
 *            boundary whose Mamba state vLLM 0.32.0 keys again (pc_recache_boundary_state). */
static void pc_thresholds(engine_t *e, const request_t *r, int64_t from) {
    int64_t grow = INT64_MAX, shrink = INT64_MAX;
    int mamba = 0;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        const pc_hold *s = hold_at(e, r, gi);
        if (g->kind == FPM_KIND_RING) {
            if (s->ring == 0) grow = -1;
            continue;
        }
        grow = min64(grow, (s->ncached + 1) * g->block - 1);
        if (is_attention(g->kind)) {
            grow = min64(grow, s->len * g->block);
            if (is_windowed(g->kind)) shrink = min64(shrink, window_drop_at(g, s->lo));
        } else {
            mamba = 1;
            grow = min64(grow, s->mcols * g->block);
            for (int64_t i = 0; i < s->mn; i++) shrink = min64(shrink, (s->mcol[i] + 1) * g->block + 1);
        }
    }
    int64_t boundary = (r->prompt_len - 1) / e->sched_block * e->sched_block;
    if (mamba && e->cfg.rules.mamba_boundary_recached && boundary > 0 && from <= boundary)
        shrink = min64(shrink, boundary);
    e->grow_at[r->slot] = grow;
    e->shrink_at[r->slot] = shrink;
}

/* R-7 step 4 with prefix caching; 0 when out of memory. */
int pc_commit(engine_t *e, request_t *r, int64_t c, int64_t a, int hits) {
    struct pc_pool *p = e->pool;
    if (r->slot < 0) {
        r->slot = (int32_t)e->free_slot[--e->nfree_slot];
        for (int gi = 0; gi < e->G; gi++) memset(hold_at(e, r, gi), 0, sizeof(pc_hold));
    }
    if (hits) { /* vLLM allocate_new_computed_blocks: every group's hits are touched first */
        for (int gi = 0; gi < e->G; gi++) {
            const fpm_group *g = &e->cfg.groups[gi];
            pc_hold *s = hold_at(e, r, gi);
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
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        pc_hold *s = hold_at(e, r, gi);
        if (is_attention(g->kind)) {
            int64_t nn = cdiv64(a, g->block) - s->len;
            if (nn > 0) {
                pc_get_new(p, nn, &tab_at(e, r, gi)[s->len]);
                s->len += nn;
            }
        } else if (g->kind == FPM_KIND_MAMBA) {
            int64_t req = cdiv64(a, g->block), d = req - s->mcols;
            int64_t ck = pc_checkpoint(e, r, gi, c, a, s->mcol, s->mn, s->mcols);
            if (d > 0) {
                int32_t newb[2];
                pc_get_new(p, 1 + ck, newb);
                if (ck) {
                    s->mcol[s->mn] = req - 2;
                    s->mid[s->mn] = newb[0];
                    s->mn++;
                }
                s->mcol[s->mn] = req - 1;
                s->mid[s->mn] = newb[ck];
                s->mn++;
                s->mcols = req;
            }
        } else if (s->ring == 0) {
            s->ring = pc_take_front(p);
        }
    }
    pc_cache_blocks(e, r, min64(a, req_len(r)));
    if (e->cfg.rules.mamba_boundary_recached) pc_recache_boundary_state(e, r, c);
    pc_thresholds(e, r, a);
    return !p->oom;
}

/* one batch per group, highest block first */
void pc_release_all(engine_t *e, request_t *r) {
    struct pc_pool *p = e->pool;
    if (r->slot < 0) return;
    int back = e->cfg.rules.free_uncached_to_back;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        pc_hold *s = hold_at(e, r, gi);
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
    r->junction = 0;
}

int64_t pc_held(const engine_t *e, const request_t *r, int gi) {
    if (r->slot < 0) return 0;
    const pc_hold *s = hold_at(e, r, gi);
    int32_t kind = e->cfg.groups[gi].kind;
    if (is_attention(kind)) return s->len - s->lo;
    if (kind == FPM_KIND_MAMBA) return s->mn;
    return s->ring ? 1 : 0;
}
