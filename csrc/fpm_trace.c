/* Trace input on columns (fpm_trace.h): the Mooncake line reader, the hash
 * chains' origins and the engine-form requests. */
#include "fpm_trace.h"

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

#define NCOLS 6
enum { C_LINE, C_PROMPT, C_OUTPUT, C_TIME, C_OFF, C_IDS };

struct fpm_trace_reader {
    fpm_trace_window w;
    col8 col[NCOLS];
    int64_t line;      /* lines read */
    int64_t requests;  /* valid requests read (kept or not) */
    double first, last;
    int32_t state;
    int64_t refused_line, dropped, clipped;
};

fpm_status fpm_trace_reader_open(const fpm_trace_window *w, fpm_trace_reader **out) {
    if (w == NULL || out == NULL || w->hash_block_tokens < 1 || w->hash_block_tokens > FPM_TRACE_MAX_TOKENS ||
        w->start < 0 || (w->end >= 0 && w->end < w->start))
        return FPM_EINVAL;
    fpm_trace_reader *r = fpm_calloc(1, sizeof *r);
    if (r == NULL) return FPM_ENOMEM;
    r->w = *w;
    int64_t zero = 0;
    if (!col_push(&r->col[C_OFF], &zero)) {
        free(r);
        return FPM_ENOMEM;
    }
    *out = r;
    return FPM_OK;
}

void fpm_trace_reader_close(fpm_trace_reader *r) {
    if (r == NULL) return;
    for (int i = 0; i < NCOLS; i++) free(r->col[i].data);
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

/* One line without its line end: 1 read (kept or not), 0 refused, -1 out of memory. */
static int read_line(fpm_trace_reader *r, const char *s, const char *e) {
    while (e > s && (e[-1] == '\r' || e[-1] == '\n')) e--;
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
    const int64_t index = r->requests;
    const int keep_window = index >= r->w.start && (r->w.end < 0 || index < r->w.end);
    int64_t keep_blocks = blocks;
    int keep = keep_window, clipped = 0;
    if (keep && r->w.max_prompt_len >= 0 && prompt > r->w.max_prompt_len) {
        if (r->w.clip) {
            clipped = 1;
            keep_blocks = r->w.max_prompt_len / H + (r->w.max_prompt_len % H != 0);
        } else {
            keep = 0;
        }
    }
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
    if (index == 0) r->first = t;
    t -= r->first;
    if (t < r->last) goto refuse;
    r->last = t;
    r->requests++;
    if (r->w.end >= 0 && index >= r->w.end) {
        r->state = FPM_TRACE_DONE;
        return 1;
    }
    if (!keep_window) return 1;
    if (!keep) {
        r->dropped++;
        return 1;
    }
    if (clipped) {
        r->clipped++;
        prompt = r->w.max_prompt_len;
    }
    int64_t line = r->line, off = ids->len;
    if (!col_push(&r->col[C_LINE], &line) || !col_push(&r->col[C_PROMPT], &prompt) ||
        !col_push(&r->col[C_OUTPUT], &output) || !col_push(&r->col[C_TIME], &t) || !col_push(&r->col[C_OFF], &off))
        return -1;
    return 1;
refuse:
    ids->len = ids_before;
    return 0;
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
        int got = read_line(r, s, e);
        if (got < 0) return FPM_ENOMEM;
        if (got == 0) {
            r->state = FPM_TRACE_REFUSED;
            r->refused_line = r->line;
        }
        pos = (e - buf) + (nl != NULL);
    }
    *consumed = pos;
    *state = r->state;
    return FPM_OK;
}

fpm_status fpm_trace_reader_columns(fpm_trace_reader *r, fpm_trace_columns *out) {
    if (r == NULL || out == NULL) return FPM_EINVAL;
    out->n = r->col[C_LINE].len;
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
    return FPM_OK;
}

fpm_status fpm_trace_scale_times(double *t, int64_t n, double shift, double factor) {
    if ((t == NULL && n != 0) || n < 0) return FPM_EINVAL;
    for (int64_t i = 0; i < n; i++) t[i] = (t[i] - shift) * factor;
    return FPM_OK;
}

/* The map (parent key, block id) -> key of the hash chains: open addressing, linear probing. */
typedef struct {
    int64_t parent, id, key; /* key < 0: empty */
} chain_slot;

static uint64_t chain_hash(int64_t parent, int64_t id) {
    uint64_t h = (uint64_t)parent * 0x9E3779B97F4A7C15ULL ^ (uint64_t)id;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ULL;
    h ^= h >> 32;
    return h;
}

static chain_slot *chain_table(int64_t cap) {
    chain_slot *t = fpm_calloc(cap, sizeof *t);
    if (t != NULL)
        for (int64_t i = 0; i < cap; i++) t[i].key = -1;
    return t;
}

fpm_status fpm_hash_origins(int64_t n, const int64_t *prompt_len, const int64_t *hash_off, const int64_t *hash_ids,
                            int64_t hash_block_tokens, int64_t first_key, int64_t *upto, int64_t *key,
                            int64_t *nkeys) {
    if (n < 0 || prompt_len == NULL || hash_off == NULL || (hash_ids == NULL && hash_off[n] != 0) ||
        hash_block_tokens < 1 || hash_block_tokens > FPM_TRACE_MAX_TOKENS || first_key < 0 || nkeys == NULL ||
        (hash_off[n] != 0 && (upto == NULL || key == NULL)))
        return FPM_EINVAL;
    int64_t cap = 1024, count = 0;
    chain_slot *t = chain_table(cap);
    if (t == NULL) return FPM_ENOMEM;
    const int64_t H = hash_block_tokens;
    for (int64_t i = 0; i < n; i++) {
        if (hash_off[i] > hash_off[i + 1] || hash_off[i] < 0) {
            free(t);
            return FPM_EINVAL;
        }
        int64_t parent = -1;
        for (int64_t j = hash_off[i], k = 1; j < hash_off[i + 1]; j++, k++) {
            if (2 * (count + 1) > cap) { /* grow: at most half full */
                chain_slot *g = chain_table(2 * cap);
                if (g == NULL) {
                    free(t);
                    return FPM_ENOMEM;
                }
                for (int64_t s = 0; s < cap; s++) {
                    if (t[s].key < 0) continue;
                    uint64_t h = chain_hash(t[s].parent, t[s].id) & (uint64_t)(2 * cap - 1);
                    while (g[h].key >= 0) h = (h + 1) & (uint64_t)(2 * cap - 1);
                    g[h] = t[s];
                }
                free(t);
                t = g;
                cap *= 2;
            }
            const int64_t id = hash_ids[j];
            uint64_t h = chain_hash(parent, id) & (uint64_t)(cap - 1);
            while (t[h].key >= 0 && (t[h].parent != parent || t[h].id != id)) h = (h + 1) & (uint64_t)(cap - 1);
            if (t[h].key < 0) {
                t[h].parent = parent;
                t[h].id = id;
                t[h].key = first_key + count++;
            }
            key[j] = t[h].key;
            upto[j] = k <= prompt_len[i] / H ? k * H : prompt_len[i];
            parent = t[h].key;
        }
    }
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
