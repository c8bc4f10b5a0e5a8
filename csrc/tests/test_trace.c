/* The Mooncake line reader, the hash chains' origins and the engine-form requests (fpm_trace.h). */
#include <string.h>

#include "../fpmcore.h"
#include "fpm_test.h"

static fpm_trace_reader *reader(int64_t start, int64_t end, int64_t max_prompt_len, int32_t clip) {
    fpm_trace_window w = {512, start, end, max_prompt_len, clip};
    fpm_trace_reader *r = NULL;
    CHECK(fpm_trace_reader_open(&w, &r) == FPM_OK);
    return r;
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
    fpm_trace_window w = {0, 0, -1, -1, 0};
    CHECK(fpm_trace_reader_open(&w, &r) == FPM_EINVAL);
}

const fpm_test_case FPM_TRACE_CASES[] = {
    {"trace_reads_the_plain_shape", test_reads_the_plain_shape},
    {"trace_window_and_over_long", test_window_and_over_long},
    {"trace_refuses_other_lines", test_refuses_other_lines},
    {"trace_feeds_in_pieces", test_feeds_in_pieces},
};
const size_t FPM_TRACE_NCASES = sizeof FPM_TRACE_CASES / sizeof FPM_TRACE_CASES[0];
