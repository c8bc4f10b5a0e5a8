/* Trace input on columns (fpm_trace.h): the line readers of the Mooncake format
 * and of fpmcore's JSONL, the hash chains' origins and the engine-form requests. */
#include "fpm_trace.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fpm_internal.h"

/* A growable array of 8-byte values. */
typedef struct {
    void *data;
    int64_t len, cap;
} col8;

static int col_push(col8 *c, const void *value) {
    if (c->len == c->cap) {
        int64_t cap = c->cap ? 2 * c->cap : 1024;
        void *grown = fpm_calloc(cap, 8);
        if (grown == NULL) return 0;
        if (c->len) memcpy(grown, c->data, (size_t)c->len * 8);
        free(c->data);
        c->data = grown;
        c->cap = cap;
    }
    memcpy((char *)c->data + (size_t)c->len * 8, value, 8);
    c->len++;
    return 1;
}

/* A growable text: strings one after another, their end offsets in a col8 (which starts with 0). */
typedef struct {
    char *data;
    int64_t len, cap;
} text_buf;

static int text_push(text_buf *t, col8 *off, const char *s, int64_t n) {
    if (t->len + n > t->cap) {
        int64_t cap = t->cap ? 2 * t->cap : 4096;
        while (cap < t->len + n) cap *= 2;
        char *grown = fpm_calloc(cap, 1);
        if (grown == NULL) return 0;
        if (t->len) memcpy(grown, t->data, (size_t)t->len);
        free(t->data);
        t->data = grown;
        t->cap = cap;
    }
    if (n) memcpy(t->data + t->len, s, (size_t)n);
    t->len += n;
    return col_push(off, &t->len);
}

/* The request_ids read so far, to find one given twice: an open-addressing set (linear probing, at most
 * three quarters full) of references to the kept ids (id < 2**31) or to the other ids (OTHER | id). */
#define ID_EMPTY UINT32_MAX
#define ID_OTHER 0x80000000u

typedef struct {
    uint32_t *slot;
    int64_t cap, count;
    text_buf other; /* the ids of requests read but not kept (before the window, dropped, after it) */
    col8 other_off;
} id_set;

static uint64_t id_hash(const char *s, int64_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    h ^= h >> 29;
    return h * 0xbf58476d1ce4e5b9ULL ^ (h >> 32);
}

#define NCOLS 7
enum { C_LINE, C_PROMPT, C_OUTPUT, C_TIME, C_OFF, C_IDS, C_IDOFF };

struct fpm_trace_reader {
    fpm_trace_window w;
    col8 col[NCOLS];
    text_buf id_text; /* the kept requests' request_ids (FPM_TRACE_FPMCORE) */
    int64_t id_longest;
    id_set ids;
    int64_t line;      /* lines read */
    int64_t requests;  /* valid requests read (kept or not) */
    double first, last;
    int32_t state;
    int32_t blank_seen; /* FPM_TRACE_FPMCORE: a blank line was read (only blank lines may follow) */
    int64_t refused_line, dropped, clipped;
};

/* The id of set reference ref. */
static const char *id_of(const fpm_trace_reader *r, uint32_t ref, int64_t *n) {
    const text_buf *t = ref & ID_OTHER ? &r->ids.other : &r->id_text;
    const int64_t *off = (ref & ID_OTHER ? r->ids.other_off.data : r->col[C_IDOFF].data);
    const uint32_t k = ref & ~ID_OTHER;
    *n = off[k + 1] - off[k];
    return t->data + off[k];
}

static int id_grow(fpm_trace_reader *r) {
    id_set *set = &r->ids;
    const int64_t cap = set->cap ? 2 * set->cap : 4096;
    uint32_t *slot = fpm_calloc(cap, sizeof *slot);
    if (slot == NULL) return 0;
    for (int64_t i = 0; i < cap; i++) slot[i] = ID_EMPTY;
    for (int64_t i = 0; i < set->cap; i++) {
        if (set->slot[i] == ID_EMPTY) continue;
        int64_t n;
        const char *s = id_of(r, set->slot[i], &n);
        uint64_t h = id_hash(s, n) & (uint64_t)(cap - 1);
        while (slot[h] != ID_EMPTY) h = (h + 1) & (uint64_t)(cap - 1);
        slot[h] = set->slot[i];
    }
    free(set->slot);
    set->slot = slot;
    set->cap = cap;
    return 1;
}

/* Adds request_id s[0 .. n) (stored as kept or not): 1 added, 0 given before (or too many), -1 out of memory. */
static int id_add(fpm_trace_reader *r, const char *s, int64_t n, int kept) {
    id_set *set = &r->ids;
    if (4 * (set->count + 1) > 3 * set->cap && !id_grow(r)) return -1;
    uint64_t h = id_hash(s, n) & (uint64_t)(set->cap - 1);
    while (set->slot[h] != ID_EMPTY) {
        int64_t m;
        const char *t = id_of(r, set->slot[h], &m);
        if (m == n && memcmp(s, t, (size_t)n) == 0) return 0;
        h = (h + 1) & (uint64_t)(set->cap - 1);
    }
    text_buf *text = kept ? &r->id_text : &set->other;
    col8 *off = kept ? &r->col[C_IDOFF] : &set->other_off;
    const int64_t zero = 0;
    if (off->len == 0 && !col_push(off, &zero)) return -1;
    const int64_t k = off->len - 1;
    if (k >= (int64_t)ID_OTHER - 1) return 0; /* 2**31 ids: the reference reader reads such a trace */
    if (!text_push(text, off, s, n)) return -1;
    set->slot[h] = (uint32_t)k | (kept ? 0u : ID_OTHER);
    set->count++;
    if (kept && n > r->id_longest) r->id_longest = n;
    return 1;
}

static void id_set_free(id_set *set) {
    free(set->slot);
    free(set->other.data);
    free(set->other_off.data);
    memset(set, 0, sizeof *set);
}

fpm_status fpm_trace_reader_open(const fpm_trace_window *w, fpm_trace_reader **out) {
    if (w == NULL || out == NULL || w->hash_block_tokens < 1 || w->hash_block_tokens > FPM_TRACE_MAX_TOKENS ||
        w->start < 0 || (w->end >= 0 && w->end < w->start) ||
        (w->format != FPM_TRACE_MOONCAKE && w->format != FPM_TRACE_FPMCORE))
        return FPM_EINVAL;
    fpm_trace_reader *r = fpm_calloc(1, sizeof *r);
    if (r == NULL) return FPM_ENOMEM;
    r->w = *w;
    int64_t zero = 0;
    if (!col_push(w->format == FPM_TRACE_FPMCORE ? &r->col[C_IDOFF] : &r->col[C_OFF], &zero)) {
        fpm_trace_reader_close(r);
        return FPM_ENOMEM;
    }
    *out = r;
    return FPM_OK;
}

void fpm_trace_reader_close(fpm_trace_reader *r) {
    if (r == NULL) return;
    for (int i = 0; i < NCOLS; i++) free(r->col[i].data);
    free(r->id_text.data);
    id_set_free(&r->ids);
    free(r);
}

/* A JSON integer below 10**18 (0, or up to 18 digits without a leading 0) at *p. */
static int read_int(const char **p, const char *e, int64_t *v) {
    const char *s = *p;
    if (s >= e || *s < '0' || *s > '9') return 0;
    if (*s == '0') {
        *v = 0;
        *p = s + 1;
        return 1;
    }
    int64_t x = 0;
    int digits = 0;
    while (s < e && *s >= '0' && *s <= '9') {
        if (++digits > 18) return 0;
        x = x * 10 + (*s - '0');
        s++;
    }
    *v = x;
    *p = s;
    return 1;
}

static int read_lit(const char **p, const char *e, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(e - *p) < n || memcmp(*p, lit, n) != 0) return 0;
    *p += n;
    return 1;
}

static void skip_space(const char **p, const char *e) {
    if (*p < e && **p == ' ') (*p)++;
}

/* ", ?" + "\"key\": ?" */
static int read_key(const char **p, const char *e, const char *key, int comma) {
    if (comma) {
        if (!read_lit(p, e, ",")) return 0;
        skip_space(p, e);
    }
    if (!read_lit(p, e, key)) return 0;
    skip_space(p, e);
    return 1;
}

static int blank(const char *s, const char *e) {
    for (; s < e; s++)
        if (!strchr(" \t\r\n\v\f\x1c\x1d\x1e\x1f", *s) || *s == '\0') return 0;
    return 1;
}

/* Whether request `index` with prompt length `prompt` is in the window and kept (not dropped as over-long),
 * and whether it is clipped (its prompt cut to max_prompt_len). */
static void window_of(const fpm_trace_reader *r, int64_t index, int64_t prompt, int *in_window, int *keep,
                      int *clipped) {
    *in_window = index >= r->w.start && (r->w.end < 0 || index < r->w.end);
    *keep = *in_window;
    *clipped = 0;
    if (*keep && r->w.max_prompt_len >= 0 && prompt > r->w.max_prompt_len) {
        if (r->w.clip)
            *clipped = 1;
        else
            *keep = 0;
    }
}

/* The request just read (index r->requests): counted, and its columns pushed when it is kept.
 * 1 read, -1 out of memory. */
static int take_request(fpm_trace_reader *r, int in_window, int keep, int clipped, int64_t prompt, int64_t output,
                        double t) {
    const int64_t index = r->requests++;
    if (r->w.end >= 0 && index >= r->w.end) {
        r->state = FPM_TRACE_DONE;
        return 1;
    }
    if (!in_window) return 1;
    if (!keep) {
        r->dropped++;
        return 1;
    }
    if (clipped) {
        r->clipped++;
        prompt = r->w.max_prompt_len;
    }
    if (!col_push(&r->col[C_PROMPT], &prompt) || !col_push(&r->col[C_OUTPUT], &output) ||
        !col_push(&r->col[C_TIME], &t))
        return -1;
    if (r->w.format == FPM_TRACE_FPMCORE) return 1; /* its ids are the request_ids; it has no content-block ids */
    int64_t line = r->line, off = r->col[C_IDS].len;
    return col_push(&r->col[C_LINE], &line) && col_push(&r->col[C_OFF], &off) ? 1 : -1;
}

/* One Mooncake line without its line end: 1 read (kept or not), 0 refused, -1 out of memory. */
static int read_mooncake_line(fpm_trace_reader *r, const char *s, const char *e) {
    if (blank(s, e)) return 1;
    if (r->line == 1 && e - s >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0) return 0;
    int64_t ts, prompt, output;
    const char *p = s;
    if (!read_lit(&p, e, "{") || !read_key(&p, e, "\"timestamp\":", 0) || !read_int(&p, e, &ts) ||
        !read_key(&p, e, "\"input_length\":", 1) || !read_int(&p, e, &prompt) ||
        !read_key(&p, e, "\"output_length\":", 1) || !read_int(&p, e, &output) ||
        !read_key(&p, e, "\"hash_ids\":", 1) || !read_lit(&p, e, "["))
        return 0;
    if (prompt < 1 || prompt > FPM_TRACE_MAX_TOKENS || output < 1 || output > FPM_TRACE_MAX_TOKENS) return 0;
    const int64_t H = r->w.hash_block_tokens;
    const int64_t blocks = prompt / H + (prompt % H != 0);
    int in_window, keep, clipped;
    window_of(r, r->requests, prompt, &in_window, &keep, &clipped);
    const int64_t keep_blocks = clipped ? r->w.max_prompt_len / H + (r->w.max_prompt_len % H != 0) : blocks;
    /* the ids: stored as they are read (the kept ones), taken back when the line is refused */
    col8 *ids = &r->col[C_IDS];
    const int64_t ids_before = ids->len;
    int64_t count = 0;
    if (p < e && *p != ']') {
        for (;;) {
            int64_t id;
            if (!read_int(&p, e, &id)) goto refuse;
            if (keep && count < keep_blocks && !col_push(ids, &id)) return -1;
            count++;
            if (p < e && *p == ',') {
                p++;
                skip_space(&p, e);
                continue;
            }
            break;
        }
    }
    if (!read_lit(&p, e, "]}") || p != e || count != blocks) goto refuse;
    double t = (double)ts / 1000.0;
    if (r->requests == 0) r->first = t;
    t -= r->first;
    if (t < r->last) goto refuse;
    r->last = t;
    return take_request(r, in_window, keep, clipped, prompt, output, t);
refuse:
    ids->len = ids_before;
    return 0;
}

/* JSON whitespace within a line. */
static void skip_ws(const char **p, const char *e) {
    while (*p < e && (**p == ' ' || **p == '\t' || **p == '\r')) (*p)++;
}

/* A JSON string of printable ASCII without escapes at *p: its characters [*s, *s + *n). */
static int read_plain_string(const char **p, const char *e, const char **s, int64_t *n) {
    const char *q = *p;
    if (q >= e || *q != '"') return 0;
    const char *start = ++q;
    for (; q < e && *q != '"'; q++)
        if (*q < 0x20 || *q > 0x7e || *q == '\\') return 0;
    if (q >= e) return 0;
    *s = start;
    *n = q - start;
    *p = q + 1;
    return 1;
}

static int digits(const char **p, const char *e) {
    const char *s = *p;
    while (*p < e && **p >= '0' && **p <= '9') (*p)++;
    return *p > s;
}

/* A JSON number without a sign at *p that is a finite double (a result that overflows or underflows is not
 * taken): the correctly rounded value, which is what Python's float() makes of it. */
static int read_seconds(const char **p, const char *e, double *v) {
    const char *s = *p, *q = s;
    if (q < e && *q == '0')
        q++;
    else if (q >= e || *q < '1' || *q > '9' || !digits(&q, e))
        return 0;
    if (q < e && *q == '.' && (++q, !digits(&q, e))) return 0;
    if (q < e && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < e && (*q == '+' || *q == '-')) q++;
        if (!digits(&q, e)) return 0;
    }
    char buf[64];
    const size_t n = (size_t)(q - s);
    if (n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end = NULL;
    errno = 0;
    const double x = strtod(buf, &end);
    /* strtod reads the whole number only under a locale whose decimal point is '.' */
    if (end != buf + n || errno != 0 || !isfinite(x)) return 0;
    *v = x;
    *p = q;
    return 1;
}

enum { F_ID = 1, F_TIME = 2, F_PROMPT = 4, F_OUTPUT = 8 };

static int field_of(const char *key, int64_t n) {
    static const struct {
        const char *name;
        int field;
    } FIELDS[] = {{"request_id", F_ID}, {"arrival_time", F_TIME}, {"prompt_len", F_PROMPT}, {"output_len", F_OUTPUT}};
    for (size_t i = 0; i < sizeof FIELDS / sizeof FIELDS[0]; i++)
        if ((size_t)n == strlen(FIELDS[i].name) && memcmp(key, FIELDS[i].name, (size_t)n) == 0)
            return FIELDS[i].field;
    return 0;
}

/* One line of fpmcore's JSONL without its line end: 1 read (kept or not), 0 refused, -1 out of memory. */
static int read_fpmcore_line(fpm_trace_reader *r, const char *s, const char *e) {
    if (blank(s, e)) {
        r->blank_seen = 1;
        return 1;
    }
    if (r->blank_seen) return 0; /* a blank line between two requests */
    const char *p = s, *id = NULL;
    int64_t idlen = 0, prompt = 0, output = 0;
    double t = 0.0;
    int seen = 0;
    skip_ws(&p, e);
    if (!read_lit(&p, e, "{")) return 0;
    for (int k = 0; k < 4; k++) {
        const char *key;
        int64_t klen;
        skip_ws(&p, e);
        if (k > 0) {
            if (!read_lit(&p, e, ",")) return 0;
            skip_ws(&p, e);
        }
        if (!read_plain_string(&p, e, &key, &klen)) return 0;
        skip_ws(&p, e);
        if (!read_lit(&p, e, ":")) return 0;
        skip_ws(&p, e);
        const int f = field_of(key, klen);
        if (f == 0 || (seen & f)) return 0;
        seen |= f;
        int ok = 0;
        if (f == F_ID)
            ok = read_plain_string(&p, e, &id, &idlen) && idlen > 0;
        else if (f == F_TIME)
            ok = read_seconds(&p, e, &t);
        else if (f == F_PROMPT)
            ok = read_int(&p, e, &prompt) && prompt >= 1 && prompt <= FPM_TRACE_MAX_TOKENS;
        else
            ok = read_int(&p, e, &output) && output >= 1 && output <= FPM_TRACE_MAX_TOKENS;
        if (!ok) return 0;
    }
    skip_ws(&p, e);
    if (!read_lit(&p, e, "}")) return 0;
    skip_ws(&p, e);
    if (p != e) return 0;
    int in_window, keep, clipped;
    window_of(r, r->requests, prompt, &in_window, &keep, &clipped);
    const int added = id_add(r, id, idlen, keep);
    if (added <= 0) return added;
    return take_request(r, in_window, keep, clipped, prompt, output, t);
}

fpm_status fpm_trace_reader_feed(fpm_trace_reader *r, const char *buf, int64_t len, int32_t at_end,
                                 int64_t *consumed, int32_t *state) {
    if (r == NULL || (buf == NULL && len != 0) || len < 0 || consumed == NULL || state == NULL) return FPM_EINVAL;
    int64_t pos = 0;
    while (r->state == FPM_TRACE_MORE && pos < len) {
        const char *s = buf + pos;
        const char *nl = memchr(s, '\n', (size_t)(len - pos));
        if (nl == NULL && !at_end) break;
        const char *e = nl != NULL ? nl : buf + len;
        r->line++;
        while (e > s && (e[-1] == '\r' || e[-1] == '\n')) e--;
        int got = r->w.format == FPM_TRACE_FPMCORE ? read_fpmcore_line(r, s, e) : read_mooncake_line(r, s, e);
        if (got < 0) return FPM_ENOMEM;
        if (got == 0) {
            r->state = FPM_TRACE_REFUSED;
            r->refused_line = r->line;
        }
        pos = (nl != NULL ? nl + 1 : buf + len) - buf;
    }
    if (r->state != FPM_TRACE_MORE || (at_end && pos == len)) id_set_free(&r->ids); /* no id is added any more */
    *consumed = pos;
    *state = r->state;
    return FPM_OK;
}

fpm_status fpm_trace_reader_columns(fpm_trace_reader *r, fpm_trace_columns *out) {
    if (r == NULL || out == NULL) return FPM_EINVAL;
    out->n = r->col[C_PROMPT].len;
    out->line = r->col[C_LINE].data;
    out->prompt_len = r->col[C_PROMPT].data;
    out->output_len = r->col[C_OUTPUT].data;
    out->arrival_time = r->col[C_TIME].data;
    out->hash_off = r->col[C_OFF].data;
    out->hash_ids = r->col[C_IDS].data;
    out->nids = r->col[C_IDS].len;
    out->over_long_dropped = r->dropped;
    out->over_long_clipped = r->clipped;
    out->lines = r->line;
    out->refused_line = r->refused_line;
    const int own = r->w.format == FPM_TRACE_FPMCORE;
    out->id_text = own ? (r->id_text.data != NULL ? r->id_text.data : "") : NULL;
    out->id_off = own ? r->col[C_IDOFF].data : NULL;
    out->id_longest = own ? r->id_longest : 0;
    return FPM_OK;
}

fpm_status fpm_trace_scale_times(double *t, int64_t n, double shift, double factor) {
    if ((t == NULL && n != 0) || n < 0) return FPM_EINVAL;
    for (int64_t i = 0; i < n; i++) t[i] = (t[i] - shift) * factor;
    return FPM_OK;
}

/* The map of the hash chains, (parent key, block id) -> key: open addressing, linear probing, at most half
 * full.  A chain's slot is found from a hash of its whole sequence of ids (chain_roll), not of the pair: the
 * sequence identifies the chain as the pair does (the parent key stands for the sequence before the id), but
 * its hash is known before the parent's key is looked up, so fpm_hash_origins hashes a request's ids first and
 * asks for each slot CHAIN_AHEAD ids before it reads it (the map is larger than the cache: a lookup is a
 * memory access, which the lookups before it then overlap). */
typedef struct {
    int64_t parent, id, key1; /* the chain's key + 1; 0: an empty slot (a table is zeroed memory) */
} chain_slot;

#define CHAIN_SEED 0x243F6A8885A308D3ULL
#define CHAIN_AHEAD 8

/* the hash of a chain whose ids before the last hash to h and whose last id is id */
static inline uint64_t chain_roll(uint64_t h, int64_t id) {
    uint64_t x = (h ^ (uint64_t)id) * 0x9E3779B97F4A7C15ULL;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 32;
    return x;
}

static chain_slot *chain_table(int64_t cap) { return fpm_calloc(cap, sizeof(chain_slot)); }

/* The slot of the chain of hash h ending in (parent, id) in a table of mask + 1 slots: its own, or the empty
 * slot where it goes. */
static inline chain_slot *chain_find(chain_slot *t, uint64_t mask, uint64_t h, int64_t parent, int64_t id) {
    uint64_t s = h & mask;
    while (t[s].key1 != 0 && (t[s].parent != parent || t[s].id != id)) s = (s + 1) & mask;
    return &t[s];
}

/* The number of distinct chains, estimated from their hashes (HyperLogLog, Flajolet et al. 2007): 2^b
 * registers, each the highest rank (leading zero bits + 1 of the hash's remaining bits) of the hashes whose top
 * b bits select it; the relative standard error is 1.04 / 2^(b/2), 1.6 % with b = 12. */
#define CHAIN_SKETCH_BITS 12

static inline void chain_sketch(uint8_t *rank, uint64_t h) {
    uint64_t rest = h << CHAIN_SKETCH_BITS;
    uint8_t r = rest == 0 ? (uint8_t)(64 - CHAIN_SKETCH_BITS + 1) : (uint8_t)(__builtin_clzll(rest) + 1);
    uint8_t *at = &rank[h >> (64 - CHAIN_SKETCH_BITS)];
    if (r > *at) *at = r;
}

static double chain_sketch_estimate(const uint8_t *rank) {
    const double m = (double)((int64_t)1 << CHAIN_SKETCH_BITS);
    double sum = 0.0;
    int64_t zeros = 0;
    for (int64_t i = 0; i < ((int64_t)1 << CHAIN_SKETCH_BITS); i++) {
        sum += ldexp(1.0, -rank[i]);
        zeros += rank[i] == 0;
    }
    double e = 0.7213 / (1.0 + 1.079 / m) * m * m / sum;
    if (e <= 2.5 * m && zeros > 0) e = m * log(m / (double)zeros); /* few chains: linear counting */
    return e;
}

/* put chain c in table g (mask + 1 slots) at the home slot of its hash (hs[key - first_key]) */
static inline void chain_put(chain_slot *g, uint64_t mask, const chain_slot *c, const uint64_t *hs,
                             int64_t first_key) {
    *chain_find(g, mask, hs[c->key1 - 1 - first_key], c->parent, c->id) = *c;
}

/* The table t of cap slots grown to 2 cap slots (NULL when out of memory; t is freed either way): each chain
 * moved to the home slot of its hash (hs[key - first_key]), asked for CHAIN_AHEAD chains before it is put in. */
static chain_slot *chain_grow(chain_slot *t, int64_t cap, const uint64_t *hs, int64_t first_key) {
    chain_slot *g = chain_table(2 * cap);
    if (g == NULL) {
        free(t);
        return NULL;
    }
    const uint64_t mask = 2 * (uint64_t)cap - 1;
    int64_t ring[CHAIN_AHEAD]; /* the slots of t whose chains wait to be put in g */
    int64_t in = 0, out = 0;   /* chains queued, chains put in */
    for (int64_t s = 0; s < cap; s++) {
        if (t[s].key1 == 0) continue;
        if (in - out == CHAIN_AHEAD) chain_put(g, mask, &t[ring[out++ % CHAIN_AHEAD]], hs, first_key);
        __builtin_prefetch(&g[hs[t[s].key1 - 1 - first_key] & mask], 1);
        ring[in++ % CHAIN_AHEAD] = s;
    }
    while (out < in) chain_put(g, mask, &t[ring[out++ % CHAIN_AHEAD]], hs, first_key);
    free(t);
    return g;
}

fpm_status fpm_hash_origins(int64_t n, const int64_t *prompt_len, const int64_t *hash_off, const int64_t *hash_ids,
                            int64_t hash_block_tokens, int64_t first_key, int64_t *upto, int64_t *key,
                            int64_t *nkeys) {
    return hash_origins_from(n, prompt_len, hash_off, hash_ids, hash_block_tokens, first_key, upto, key, nkeys, 0);
}

fpm_status hash_origins_from(int64_t n, const int64_t *prompt_len, const int64_t *hash_off, const int64_t *hash_ids,
                             int64_t hash_block_tokens, int64_t first_key, int64_t *upto, int64_t *key,
                             int64_t *nkeys, int64_t first_cap) {
    if (n < 0 || prompt_len == NULL || hash_off == NULL || (hash_ids == NULL && hash_off[n] != 0) ||
        hash_block_tokens < 1 || hash_block_tokens > FPM_TRACE_MAX_TOKENS || first_key < 0 || nkeys == NULL ||
        (hash_off[n] != 0 && (upto == NULL || key == NULL)))
        return FPM_EINVAL;
    for (int64_t i = 0; i < n; i++)
        if (hash_off[i] > hash_off[i + 1] || hash_off[i] < 0) return FPM_EINVAL;
    const int64_t H = hash_block_tokens, total = hash_off[n];
    /* first pass: each position's chain hash, kept in upto[] until the position is looked up, and the number of
     * distinct hashes estimated, so that the map is made at its size once: growing it moves every chain and
     * takes fresh memory, whose first touch is a page fault (most of the time of a first call, measured) */
    uint8_t *rank = fpm_calloc((int64_t)1 << CHAIN_SKETCH_BITS, 1);
    if (rank == NULL) return FPM_ENOMEM;
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = CHAIN_SEED;
        for (int64_t j = hash_off[i]; j < hash_off[i + 1]; j++) {
            h = chain_roll(h, hash_ids[j]);
            upto[j] = (int64_t)h;
            chain_sketch(rank, h);
        }
    }
    int64_t cap = 1024, count = 0;
    double distinct = chain_sketch_estimate(rank) * 1.05; /* the estimate's error is about 1.6 % */
    free(rank);
    if (first_cap > 0)
        cap = first_cap;
    else
        while (cap < 2 * distinct && cap < ((int64_t)1 << 40)) cap *= 2;
    chain_slot *t = chain_table(cap);
    uint64_t *hs = fpm_calloc(cap / 2, sizeof(uint64_t)); /* each chain's hash, by key - first_key */
    if (t == NULL || hs == NULL) {
        free(t);
        free(hs);
        return FPM_ENOMEM;
    }
    uint64_t mask = (uint64_t)cap - 1;
    for (int64_t j = 0; j < total && j < CHAIN_AHEAD; j++) __builtin_prefetch(&t[(uint64_t)upto[j] & mask]);
    for (int64_t i = 0; i < n; i++) {
        int64_t parent = -1;
        for (int64_t j = hash_off[i], k = 1; j < hash_off[i + 1]; j++, k++) {
            if (2 * (count + 1) > cap) { /* grow: at most half full */
                void *grown = hs;
                t = chain_grow(t, cap, hs, first_key);
                if (t == NULL || !fpm_grow(&grown, cap / 2, cap, sizeof(uint64_t))) {
                    free(t);
                    free(grown);
                    return FPM_ENOMEM;
                }
                hs = grown;
                cap *= 2;
                mask = (uint64_t)cap - 1;
            }
            if (j + CHAIN_AHEAD < total) __builtin_prefetch(&t[(uint64_t)upto[j + CHAIN_AHEAD] & mask]);
            const int64_t id = hash_ids[j];
            const uint64_t h = (uint64_t)upto[j];
            chain_slot *s = chain_find(t, mask, h, parent, id);
            if (s->key1 == 0) {
                hs[count] = h;
                s->parent = parent;
                s->id = id;
                s->key1 = first_key + count++ + 1;
            }
            key[j] = parent = s->key1 - 1;
            upto[j] = k <= prompt_len[i] / H ? k * H : prompt_len[i];
        }
    }
    free(hs);
    free(t);
    *nkeys = count;
    return FPM_OK;
}

/* the first step k with k * s >= t (as fpmcore.replay.engine.arrival_step_for). */
static int64_t arrival_step(double t, double s, int64_t limit) {
    double q = t / s;
    if (!(q <= (double)limit + 1.0)) return limit + 1;
    int64_t k = (int64_t)ceil(q);
    if (k < 0) k = 0;
    while (k > 0 && (double)(k - 1) * s >= t) k--;
    while ((double)k * s < t) k++;
    return k;
}

fpm_status fpm_trace_requests(int64_t n, const int64_t *prompt_len, const int64_t *output_len,
                              const double *arrival_time, const int64_t *hash_off, double step_seconds,
                              int64_t max_arrival_step, fpm_replay_request *reqs, int64_t *bad) {
    if (n < 0 || bad == NULL || max_arrival_step < 0 || max_arrival_step > FPM_MAX_ARRIVAL_STEP ||
        (n > 0 && (prompt_len == NULL || output_len == NULL || arrival_time == NULL || reqs == NULL)) ||
        !(step_seconds <= 0 || isfinite(step_seconds)))
        return FPM_EINVAL;
    *bad = -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t step = 0;
        if (step_seconds > 0) step = arrival_step(arrival_time[i], step_seconds, max_arrival_step);
        if (prompt_len[i] > FPM_MAX_TOKENS || output_len[i] > FPM_MAX_TOKENS || step > max_arrival_step) {
            *bad = i;
            return FPM_OK;
        }
        fpm_replay_request *r = &reqs[i];
        r->prompt_len = prompt_len[i];
        r->output_len = output_len[i];
        r->arrival_step = step;
        r->arrival_time = arrival_time[i];
        r->own_key = i;
        r->origin_off = hash_off != NULL ? hash_off[i] : 0;
        r->origin_len = hash_off != NULL ? hash_off[i + 1] - hash_off[i] : 0;
        r->priority = 0;
    }
    return FPM_OK;
}
