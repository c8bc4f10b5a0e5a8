/* The prefix-caching pool's block records, key map and free queue (fpm_prefix.c, R-36 ... R-38),
 * static functions for the block loops of fpm_prefix.c and fpm_prefix_lookup.c, its includers.
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
#ifndef FPM_PREFIX_POOL_H
#define FPM_PREFIX_POOL_H

#include <stdlib.h>
#include <string.h>

#include "fpm_internal.h"

#define PC_MAXM 4    /* Mamba blocks one request holds in one group: running, transient, checkpoint */
#define MARK (-1)    /* the fresh range's place in the free queue: record -1 */
#define NOKEY UINT64_MAX /* the key word of a block without a key (no key packs or hashes to it) */
/* the free queue's out-of-line functions, which the lookup (fpm_prefix_lookup.c) does not call */
#define PC_MAYBE_UNUSED __attribute__((unused))

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
    /* wide, mamba, kshift and hbits are int16_t, a type no block loop stores through: the loops keep
     * them in registers across their stores to the int32_t block records */
    int16_t wide;       /* keys do not pack into one word */
    int16_t mamba;      /* a Mamba group: keys carry stamps */
    int16_t kshift;     /* compact keys: origin << kshift | block index * groups + group */
    int64_t qlen;       /* free queue length, fresh blocks included */
    int32_t *bucket;    /* the key map: first block of each bucket (0: empty) */
    int16_t hbits;      /* 2^hbits buckets */
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
    int32_t *full_groups;    /* the full-attention groups, in order (a lookup's first walk) */
    int32_t nfull_groups;
    int32_t first_mamba;     /* the first Mamba group, -1: none */
    int16_t has_other;       /* a windowed, chunked or Mamba group (a lookup's second walk) */
    int16_t lockstep;        /* two or more Mamba groups, all of one checkpoint class (ckpt_class): in lockstep */
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
    p->hbits = (int16_t)bits;
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
static inline __attribute__((always_inline)) int32_t pc_lookup_key(const struct pc_pool *p, int64_t a, int64_t b) {
    uint64_t w = pc_word(p, a, b);
    int32_t x = p->bucket[ht_home(p, w)];
    while (x && !pc_match(p, x, w, a, b)) x = p->blk[x].hnext;
    return x;
}

/* drop the key of block b, which has one, with Mamba stamps: b leaves its bucket's list; the next block
 * of its key, if any, becomes the key's first and takes the Mamba stamp */
static void pc_evict_stamped_key(struct pc_pool *p, int32_t b) {
    pc_block *bl = &p->blk[b];
    int32_t *link = &p->bucket[ht_home(p, bl->key)];
    int first = 1;
    while (*link != b) {
        if (pc_same_key(p, *link, b)) first = 0;
        link = &p->blk[*link].hnext;
    }
    *link = bl->hnext;
    if (first) {
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

/* drop the key of block b, which has one: b leaves its bucket's list (no stamps without Mamba groups) */
static inline __attribute__((always_inline)) void pc_evict_key(struct pc_pool *p, int32_t b) {
    if (p->mamba) {
        pc_evict_stamped_key(p, b);
        return;
    }
    pc_block *bl = &p->blk[b];
    int32_t *link = &p->bucket[ht_home(p, bl->key)];
    while (*link != b) link = &p->blk[*link].hnext;
    *link = bl->hnext;
    bl->hnext = 0;
    bl->key = NOKEY;
    p->hcount--;
}

/* drop block b's key (eviction), if it has one */
static inline void pc_evict(struct pc_pool *p, int32_t b) {
    if (p->blk[b].key != NOKEY) pc_evict_key(p, b);
}

/* does block b carry key (a, kb)? */
static inline int pc_has_key(const struct pc_pool *p, int32_t b, int64_t a, int64_t kb) {
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
    if (p->mamba) {
        while (*link) {
            if (!first && pc_match(p, *link, w, a, kb)) first = *link;
            link = &p->blk[*link].hnext;
        }
    } else { /* the stamps are read for Mamba groups only */
        while (*link) link = &p->blk[*link].hnext;
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
    if (!p->mamba) return;
    if (!first) {
        first = b;
        bl->stamp = 0;
    }
    if (mamba) p->blk[first].stamp = p->stamp;
}

/* The block loops ask for a key's bucket PC_AHEAD blocks before they need it: a lookup or an insertion
 * starts with a cache miss in a map larger than the cache, which the loop's work then overlaps.
 * always_inline: GCC finds a function whose only effect is a prefetch free of side effects and drops
 * the calls of an out-of-line or merely inline one (GCC 12 -O1 and -O2), prefetch and all. */
#define PC_AHEAD 8
static inline __attribute__((always_inline)) void pc_prefetch_key(const struct pc_pool *p, int64_t a, int64_t b) {
    __builtin_prefetch(&p->bucket[ht_home(p, pc_word(p, a, b))]);
}

/* Was a Mamba state cached in this step under the key whose first block is x (0: no block has the key)? */
static inline int pc_cached_this_step(const struct pc_pool *p, int32_t x) { return x && p->blk[x].stamp == p->stamp; }

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

/* get_new_blocks of n: the used blocks at the front of the queue are taken as one run (their keys
 * evicted, the queue relinked once after the run), then fresh ones one by one */
static PC_MAYBE_UNUSED void pc_get_new(struct pc_pool *p, int64_t n, int32_t *out) {
    int64_t i = 0;
    int32_t b = p->blk[0].qn;
    while (i < n && b != MARK && b != 0) {
        int32_t nx = p->blk[b].qn;
        if (nx > 0) __builtin_prefetch(&p->blk[nx], 1);
        pc_evict(p, b);
        p->blk[b].ref = 1;
        out[i++] = b;
        b = nx;
    }
    if (i > 0) {
        p->blk[0].qn = b;
        p->blk[b].qp = 0;
        p->qlen -= i;
    }
    for (; i < n; i++) out[i] = pc_take_front(p);
}

/* free_blocks: cached blocks to the back in batch order, the others to the front */
static PC_MAYBE_UNUSED void pc_free_batch(struct pc_pool *p, int32_t *bs, int64_t n, int uncached_to_back) {
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
    if (nback == 0) return;
    int32_t tail = p->blk[0].qp; /* the back blocks, chained after the queue's last */
    for (int64_t i = 0; i < nback; i++) {
        p->blk[tail].qn = bs[i];
        p->blk[bs[i]].qp = tail;
        tail = bs[i];
    }
    p->blk[tail].qn = 0;
    p->blk[0].qp = tail;
}

static PC_MAYBE_UNUSED void pc_touch(struct pc_pool *p, int32_t b) {
    if (b == 0) return;
    if (p->blk[b].ref == 0) {
        q_unlink(p, b);
        p->qlen--;
    }
    p->blk[b].ref++;
}

static inline int32_t pc_ref(const struct pc_pool *p, int32_t b) { return p->blk[b].ref; }

#endif
