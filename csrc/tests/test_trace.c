/* The line readers of the Mooncake format and of fpmcore's JSONL, the hash chains' origins and the
 * engine-form requests (fpm_trace.h). */
#include <stdio.h>
#include <string.h>

#include "../fpm_internal.h"
#include "../fpmcore.h"
#include "fpm_test.h"

static fpm_trace_reader *reader_of(int64_t start, int64_t end, int64_t max_prompt_len, int32_t clip, int32_t format) {
    fpm_trace_window w = {512, start, end, max_prompt_len, clip, format};
    fpm_trace_reader *r = NULL;
    CHECK(fpm_trace_reader_open(&w, &r) == FPM_OK);
    return r;
}

static fpm_trace_reader *reader(int64_t start, int64_t end, int64_t max_prompt_len, int32_t clip) {
    return reader_of(start, end, max_prompt_len, clip, FPM_TRACE_MOONCAKE);
}

static int32_t feed_all(fpm_trace_reader *r, const char *text) {
    int64_t len = (int64_t)strlen(text), done = 0;
    int32_t state = -1;
    CHECK(fpm_trace_reader_feed(r, text, len, 1, &done, &state) == FPM_OK);
    return state;
}

static const char TRACE[] =
    "{\"timestamp\": 1000, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 1]}\n"
    "\n"
    "{\"timestamp\":1500,\"input_length\":512,\"output_length\":7,\"hash_ids\":[0]}\r\n"
    "{\"timestamp\": 2000, \"input_length\": 1100, \"output_length\": 9, \"hash_ids\": [0, 1, 4]}";

static void test_reads_the_plain_shape(void) {
    fpm_trace_reader *r = reader(0, -1, -1, 0);
    CHECK(feed_all(r, TRACE) == FPM_TRACE_MORE);
    fpm_trace_columns c;
    CHECK(fpm_trace_reader_columns(r, &c) == FPM_OK);
    CHECK(c.n == 3 && c.nids == 6 && c.lines == 4);
    CHECK(c.line[0] == 1 && c.line[1] == 3 && c.line[2] == 4);
    CHECK(c.prompt_len[2] == 1100 && c.output_len[1] == 7);
    CHECK(c.arrival_time[0] == 0.0 && c.arrival_time[1] == 0.5 && c.arrival_time[2] == 1.0);
    CHECK(c.hash_off[3] == 6 && c.hash_ids[5] == 4);
    int64_t upto[6], key[6], nkeys = 0;
    CHECK(fpm_hash_origins(c.n, c.prompt_len, c.hash_off, c.hash_ids, 512, 3, upto, key, &nkeys) == FPM_OK);
    CHECK(nkeys == 3);
    CHECK(key[0] == 3 && key[1] == 4 && key[2] == 3 && key[3] == 3 && key[4] == 4 && key[5] == 5);
    CHECK(upto[0] == 512 && upto[1] == 600 && upto[2] == 512 && upto[5] == 1100);
    fpm_replay_request q[3];
    int64_t bad = 0;
    CHECK(fpm_trace_requests(c.n, c.prompt_len, c.output_len, c.arrival_time, c.hash_off, 0.5, 10, q, &bad) == FPM_OK);
    CHECK(bad == -1 && q[2].arrival_step == 2 && q[1].arrival_step == 1 && q[2].origin_off == 3);
    CHECK(fpm_trace_requests(c.n, c.prompt_len, c.output_len, c.arrival_time, NULL, 0.25, 3, q, &bad) == FPM_OK);
    CHECK(bad == 2 && q[1].origin_len == 0);
    fpm_trace_reader_close(r);
}

static void test_window_and_over_long(void) {
    fpm_trace_reader *r = reader(1, 2, -1, 0);
    CHECK(feed_all(r, TRACE) == FPM_TRACE_DONE);
    fpm_trace_columns c;
    CHECK(fpm_trace_reader_columns(r, &c) == FPM_OK);
    CHECK(c.n == 1 && c.line[0] == 3);
    fpm_trace_reader_close(r);
    r = reader(0, -1, 550, 1);
    CHECK(feed_all(r, TRACE) == FPM_TRACE_MORE);
    CHECK(fpm_trace_reader_columns(r, &c) == FPM_OK);
    CHECK(c.n == 3 && c.over_long_clipped == 2 && c.prompt_len[2] == 550 && c.nids == 5);
    fpm_trace_reader_close(r);
    r = reader(0, -1, 550, 0);
    CHECK(feed_all(r, TRACE) == FPM_TRACE_MORE);
    CHECK(fpm_trace_reader_columns(r, &c) == FPM_OK);
    CHECK(c.n == 1 && c.over_long_dropped == 2 && c.nids == 1);
    fpm_trace_reader_close(r);
}

static void test_refuses_other_lines(void) {
    static const char *const BAD[] = {
        "{\"timestamp\": 1, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0]}",
        "{\"timestamp\": 1, \"input_length\": 0, \"output_length\": 5, \"hash_ids\": []}",
        "{\"timestamp\": 01, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [0]}",
        "{\"timestamp\": 1, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [0], \"x\": 1}",
        "{\"timestamp\": 1.5, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [0]}",
        "{\"timestamp\": 1, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [1000000000000000000]}",
        "\xef\xbb\xbf{\"timestamp\": 1, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [0]}",
        "{\"timestamp\": 9, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [0]}\n"
        "{\"timestamp\": 8, \"input_length\": 6, \"output_length\": 5, \"hash_ids\": [0]}",
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        fpm_trace_reader *r = reader(0, -1, -1, 0);
        CHECK(feed_all(r, BAD[i]) == FPM_TRACE_REFUSED);
        fpm_trace_columns c;
        CHECK(fpm_trace_reader_columns(r, &c) == FPM_OK);
        CHECK(c.refused_line == (i == 7 ? 2 : 1) && c.nids == (i == 7 ? 1 : 0));
        fpm_trace_reader_close(r);
    }
}

static void test_feeds_in_pieces(void) {
    fpm_trace_reader *r = reader(0, -1, -1, 0);
    int64_t len = (int64_t)strlen(TRACE), pos = 0, done = 0;
    int32_t state = -1;
    char buf[256];
    int64_t have = 0;
    for (;;) { /* pieces of at most 50 bytes, shorter than a line */
        int64_t take = len - pos < 50 ? len - pos : 50;
        memcpy(buf + have, TRACE + pos, (size_t)take);
        have += take;
        pos += take;
        CHECK(fpm_trace_reader_feed(r, buf, have, pos == len, &done, &state) == FPM_OK);
        memmove(buf, buf + done, (size_t)(have - done));
        have -= done;
        if (pos == len) break;
    }
    fpm_trace_columns c;
    CHECK(fpm_trace_reader_columns(r, &c) == FPM_OK);
    CHECK(state == FPM_TRACE_MORE && c.n == 3 && c.nids == 6);
    fpm_trace_reader_close(r);
    fpm_trace_window w = {0, 0, -1, -1, 0, FPM_TRACE_MOONCAKE};
    CHECK(fpm_trace_reader_open(&w, &r) == FPM_EINVAL);
    fpm_trace_window unknown = {512, 0, -1, -1, 0, 2};
    CHECK(fpm_trace_reader_open(&unknown, &r) == FPM_EINVAL);
}

/* fpmcore's JSONL: the fields in any order, JSON whitespace, a CRLF line end, no line end at the end, the
 * request_ids as written (no escape needed), the arrival times as they are, blank lines after the last request. */
static const char OWN[] =
    "{\"request_id\": \"a\", \"arrival_time\": 2.5, \"prompt_len\": 600, \"output_len\": 5}\n"
    "{ \"output_len\":7,\"prompt_len\":512 ,\t\"arrival_time\":1e-3,\"request_id\":\"b c\" }\r\n"
    "{\"request_id\": \"x\", \"arrival_time\": 0, \"prompt_len\": 1099511627776, \"output_len\": 1}\n"
    "{\"request_id\": \"d\", \"arrival_time\": 0.30000000000000004, \"prompt_len\": 9, \"output_len\": 2}\n"
    "\n"
    "  ";

static void test_reads_fpmcore_lines(void) {
    fpm_trace_reader *r = reader_of(0, -1, -1, 0, FPM_TRACE_FPMCORE);
    CHECK(feed_all(r, OWN) == FPM_TRACE_MORE);
    fpm_trace_columns c;
    CHECK(fpm_trace_reader_columns(r, &c) == FPM_OK);
    CHECK(c.n == 4 && c.nids == 0 && c.lines == 6 && c.hash_off == NULL && c.line == NULL);
    CHECK(c.prompt_len[2] == FPM_TRACE_MAX_TOKENS && c.output_len[1] == 7);
    CHECK(c.arrival_time[0] == 2.5 && c.arrival_time[1] == 1e-3 && c.arrival_time[2] == 0.0);
    CHECK(c.arrival_time[3] == 0.1 + 0.2);
    CHECK(c.id_off[4] == 6 && c.id_longest == 3 && memcmp(c.id_text, "ab cxd", 6) == 0);
    fpm_trace_reader_close(r);
    /* the window and over-long prompts as for Mooncake lines; the ids outside the window still count */
    r = reader_of(1, 3, 550, 0, FPM_TRACE_FPMCORE);
    CHECK(feed_all(r, OWN) == FPM_TRACE_DONE);
    CHECK(fpm_trace_reader_columns(r, &c) == FPM_OK);
    CHECK(c.n == 1 && c.over_long_dropped == 1 && c.id_off[1] == 3 && memcmp(c.id_text, "b c", 3) == 0);
    fpm_trace_reader_close(r);
    r = reader_of(0, -1, 550, 1, FPM_TRACE_FPMCORE);
    CHECK(feed_all(r, OWN) == FPM_TRACE_MORE);
    CHECK(fpm_trace_reader_columns(r, &c) == FPM_OK);
    CHECK(c.n == 4 && c.over_long_clipped == 2 && c.prompt_len[0] == 550 && c.prompt_len[2] == 550);
    fpm_trace_reader_close(r);
    r = reader_of(0, 1, -1, 0, FPM_TRACE_FPMCORE); /* the request after the window is read and checked */
    CHECK(feed_all(r, "{\"request_id\": \"a\", \"arrival_time\": 1, \"prompt_len\": 6, \"output_len\": 5}\n"
                      "{\"request_id\": \"a\", \"arrival_time\": 1, \"prompt_len\": 6, \"output_len\": 5}\n") ==
          FPM_TRACE_REFUSED);
    fpm_trace_reader_close(r);
    r = reader_of(0, -1, -1, 0, FPM_TRACE_FPMCORE); /* an empty file */
    CHECK(feed_all(r, "") == FPM_TRACE_MORE);
    CHECK(fpm_trace_reader_columns(r, &c) == FPM_OK);
    CHECK(c.n == 0 && c.lines == 0 && c.id_off[0] == 0 && c.id_text != NULL);
    fpm_trace_reader_close(r);
}

static void test_refuses_other_fpmcore_lines(void) {
#define LINE(ID, T, P, O) "{\"request_id\": " ID ", \"arrival_time\": " T ", \"prompt_len\": " P ", \"output_len\": " O "}"
    static const char *const BAD[] = {
        LINE("\"a\"", "1", "6", "5") "\n\n" LINE("\"b\"", "1", "6", "5"), /* a blank line between two requests */
        LINE("\"a\"", "1", "6", "5") "\n" LINE("\"a\"", "2", "6", "5"),   /* a request_id given before */
        LINE("\"\"", "1", "6", "5"),
        LINE("\"a\\\"b\"", "1", "6", "5"), /* an escape */
        LINE("\"\xc3\xa9\"", "1", "6", "5"),
        LINE("\"a\tb\"", "1", "6", "5"),
        LINE("7", "1", "6", "5"),
        LINE("\"a\"", "-0", "6", "5"),
        LINE("\"a\"", "1e400", "6", "5"), /* not a finite double */
        LINE("\"a\"", "1e-400", "6", "5"),
        LINE("\"a\"", "01", "6", "5"),
        LINE("\"a\"", "1.", "6", "5"),
        LINE("\"a\"", ".5", "6", "5"),
        LINE("\"a\"", "1e", "6", "5"),
        LINE("\"a\"", "NaN", "6", "5"),
        LINE("\"a\"", "1.000000000000000000000000000000000000000000000000000000000000000001", "6", "5"),
        LINE("\"a\"", "1", "0", "5"),
        LINE("\"a\"", "1", "6", "1099511627777"),
        LINE("\"a\"", "1", "6.0", "5"),
        LINE("\"a\"", "1", "1000000000000000000", "5"),
        LINE("\"a\"", "1", "true", "5"),
        "{\"request_id\": \"a\", \"arrival_time\": 1, \"prompt_len\": 6}",
        "{\"request_id\": \"a\", \"arrival_time\": 1, \"prompt_len\": 6, \"output_len\": 5, \"priority\": 1}",
        "{\"request_id\": \"a\", \"arrival_step\": 1, \"prompt_len\": 6, \"output_len\": 5}",
        "{\"request_id\": \"a\", \"request_id\": \"b\", \"prompt_len\": 6, \"output_len\": 5}",
        "{\"request_id\": \"a\", \"arrival_time\": 1, \"prompt_len\": 6, \"output_len\": 5,}",
        "{\"request_id\": \"a\", \"arrival_time\": 1, \"prompt_len\": 6, \"output_len\": 5} x",
        "{\"request_id\": \"a\", \"arrival_time\": 1, \"prompt_len\": 6, \"output_len\": 5",
        "[]",
        "\xef\xbb\xbf" LINE("\"a\"", "1", "6", "5"),
        "\x0b\n" LINE("\"a\"", "1", "6", "5"),
    };
#undef LINE
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        fpm_trace_reader *r = reader_of(0, -1, -1, 0, FPM_TRACE_FPMCORE);
        CHECK(feed_all(r, BAD[i]) == FPM_TRACE_REFUSED);
        fpm_trace_columns c;
        CHECK(fpm_trace_reader_columns(r, &c) == FPM_OK);
        CHECK(c.refused_line == (i < 2 ? 3 - (int64_t)i : i == sizeof BAD / sizeof BAD[0] - 1 ? 2 : 1));
        fpm_trace_reader_close(r);
    }
}

static void test_many_request_ids(void) {
    /* enough ids to grow the set of ids several times, fed in pieces that cut lines; then one given before */
    fpm_trace_reader *r = reader_of(10, -1, 700, 0, FPM_TRACE_FPMCORE);
    char line[128];
    int64_t done = 0;
    int32_t state = -1;
    for (int i = 0; i < 20000; i++) {
        int n = snprintf(line, sizeof line, "{\"request_id\": \"r%d\", \"arrival_time\": %d.25, \"prompt_len\": %d, "
                         "\"output_len\": 3}\n", i, i, 1 + i % 1000);
        CHECK(fpm_trace_reader_feed(r, line, n, 0, &done, &state) == FPM_OK && done == n && state == FPM_TRACE_MORE);
    }
    fpm_trace_columns c;
    CHECK(fpm_trace_reader_columns(r, &c) == FPM_OK);
    CHECK(c.n == 19990 - c.over_long_dropped && c.over_long_dropped > 0 && c.id_longest == 6);
    CHECK(c.id_off[1] - c.id_off[0] == 3 && memcmp(c.id_text, "r10", 3) == 0 && c.arrival_time[0] == 10.25);
    const char again[] = "{\"request_id\": \"r5\", \"arrival_time\": 1, \"prompt_len\": 6, \"output_len\": 5}";
    CHECK(fpm_trace_reader_feed(r, again, (int64_t)strlen(again), 1, &done, &state) == FPM_OK);
    CHECK(state == FPM_TRACE_REFUSED);
    fpm_trace_reader_close(r);
}

/* 3,000 requests of two ids each, [i % 3, 1000 + i]: three shared first blocks and a chain per request, 3,003
 * chains; keys in order of first appearance: request i < 3 gives F + 2i and F + 2i + 1, a later one F + 2 (i % 3)
 * and F + 6 + (i - 3).  The chain map made at the size the estimate asks for, and made at 1,024 slots, so that
 * it grows to 8,192, moving every chain each time. */
static void test_hash_origins_many_chains(void) {
    enum { N = 3000, F = 7 };
    static int64_t prompt_len[N], hash_off[N + 1], hash_ids[2 * N], upto[2 * N], key[2 * N];
    for (int64_t i = 0; i < N; i++) {
        prompt_len[i] = 1000;
        hash_off[i] = 2 * i;
        hash_ids[2 * i] = i % 3;
        hash_ids[2 * i + 1] = 1000 + i;
    }
    hash_off[N] = 2 * N;
    for (int64_t first_cap = 0; first_cap <= 1024; first_cap += 1024) {
        int64_t nkeys = 0;
        CHECK(hash_origins_from(N, prompt_len, hash_off, hash_ids, 512, F, upto, key, &nkeys, first_cap) == FPM_OK);
        CHECK(nkeys == 6 + (N - 3));
        int ok = 1;
        for (int64_t i = 0; i < N; i++) {
            int64_t first = i < 3 ? F + 2 * i : F + 2 * (i % 3), second = i < 3 ? F + 2 * i + 1 : F + 6 + (i - 3);
            ok &= key[2 * i] == first && key[2 * i + 1] == second && upto[2 * i] == 512 && upto[2 * i + 1] == 1000;
        }
        CHECK(ok);
    }
}

const fpm_test_case FPM_TRACE_CASES[] = {
    {"trace_reads_the_plain_shape", test_reads_the_plain_shape},
    {"trace_window_and_over_long", test_window_and_over_long},
    {"trace_refuses_other_lines", test_refuses_other_lines},
    {"trace_feeds_in_pieces", test_feeds_in_pieces},
    {"trace_reads_fpmcore_lines", test_reads_fpmcore_lines},
    {"trace_refuses_other_fpmcore_lines", test_refuses_other_fpmcore_lines},
    {"trace_many_request_ids", test_many_request_ids},
    {"trace_hash_origins_many_chains", test_hash_origins_many_chains},
};
const size_t FPM_TRACE_NCASES = sizeof FPM_TRACE_CASES / sizeof FPM_TRACE_CASES[0];
