/*
 * test_raft_codec.c — common/raft_codec.c: Raft messages to and from
 * libraft 0.15's wire format.
 *
 * Against an encoder written apart (tests/lib/raft_wire.c, whose frames
 * real libraft members read in test_raft_peer_security): the same
 * RequestVote, TimeoutNow, AppendEntries (with command, barrier and
 * configuration entries) and InstallSnapshot encode to the same bytes,
 * and its frames decode to the same fields. The two result messages,
 * which raft_wire does not write, are checked word by word against
 * libraft's layout. Every type round-trips; what the frame check refuses,
 * a cut message or two messages in one buffer are refused; what libraft
 * would never send is not encoded.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "le.h"
#include "raft_codec.h"
#include "raft_wire.h"

static void encode(const struct raft_message *m, uint8_t **out, size_t *len)
{
    const char *why = NULL;
    int rc = raft_codec_encode(m, out, len, &why);
    if (rc != 0)
        fail_msg("encode: %s", why);
}

static void decode(const uint8_t *b, size_t len, struct raft_message *m)
{
    const char *why = NULL;
    int rc = raft_codec_decode(b, len, NULL, m, &why);
    if (rc != 0)
        fail_msg("decode: %s", why);
}

/* m encodes to exactly the bytes of want. */
static void same_bytes(const struct raft_message *m, const rw_buf *want)
{
    uint8_t *b;
    size_t len;
    assert_false(want->failed);
    encode(m, &b, &len);
    assert_int_equal(len, want->len);
    assert_memory_equal(b, want->data, len);
    free(b);
}

static void test_votes_and_timeout_match_an_encoder_written_apart(void **state)
{
    (void)state;
    rw_buf w = {0};
    struct raft_message m = {.type = RAFT_IO_REQUEST_VOTE,
                             .request_vote = {.term = 7, .candidate_id = 0x200000003ull,
                                              .last_log_index = 41, .last_log_term = 6,
                                              .disrupt_leader = true, .pre_vote = true}};
    rw_enc_request_vote(&w, 7, 0x200000003ull, 41, 6, RW_VOTE_DISRUPT_LEADER | RW_VOTE_PRE_VOTE);
    same_bytes(&m, &w);
    struct raft_message d;
    decode(w.data, w.len, &d);
    assert_int_equal(d.type, RAFT_IO_REQUEST_VOTE);
    assert_int_equal(d.request_vote.term, 7);
    assert_int_equal(d.request_vote.candidate_id, 0x200000003ull);
    assert_int_equal(d.request_vote.last_log_index, 41);
    assert_int_equal(d.request_vote.last_log_term, 6);
    assert_true(d.request_vote.disrupt_leader);
    assert_true(d.request_vote.pre_vote);
    rw_buf_free(&w);

    m.request_vote.disrupt_leader = false;
    rw_enc_request_vote(&w, 7, 0x200000003ull, 41, 6, RW_VOTE_PRE_VOTE);
    same_bytes(&m, &w);
    decode(w.data, w.len, &d);
    assert_false(d.request_vote.disrupt_leader);
    assert_true(d.request_vote.pre_vote);
    rw_buf_free(&w);

    m = (struct raft_message){.type = RAFT_IO_TIMEOUT_NOW,
                              .timeout_now = {.term = 9, .last_log_index = 100,
                                              .last_log_term = 8}};
    rw_enc_timeout_now(&w, 9, 100, 8);
    same_bytes(&m, &w);
    decode(w.data, w.len, &d);
    assert_int_equal(d.type, RAFT_IO_TIMEOUT_NOW);
    assert_int_equal(d.timeout_now.term, 9);
    assert_int_equal(d.timeout_now.last_log_index, 100);
    assert_int_equal(d.timeout_now.last_log_term, 8);
    rw_buf_free(&w);
}

static void test_results_lie_where_libraft_reads_them(void **state)
{
    (void)state;
    uint8_t *b;
    size_t len;
    struct raft_message d, m = {.type = RAFT_IO_REQUEST_VOTE_RESULT,
                                .request_vote_result = {.term = 5, .vote_granted = true,
                                                        .pre_vote = raft_tribool_true}};
    /* [type 4][H 24][term][granted][flags: 1 pre-vote] */
    encode(&m, &b, &len);
    assert_int_equal(len, 16 + 24);
    assert_int_equal(le_get64(b + 0), 4);
    assert_int_equal(le_get64(b + 8), 24);
    assert_int_equal(le_get64(b + 16), 5);
    assert_int_equal(le_get64(b + 24), 1);
    assert_int_equal(le_get64(b + 32), 1);
    decode(b, len, &d);
    assert_int_equal(d.request_vote_result.term, 5);
    assert_true(d.request_vote_result.vote_granted);
    assert_int_equal(d.request_vote_result.pre_vote, raft_tribool_true);
    free(b);
    m.request_vote_result.pre_vote = raft_tribool_false;
    m.request_vote_result.vote_granted = false;
    encode(&m, &b, &len);
    assert_int_equal(le_get64(b + 24), 0);
    assert_int_equal(le_get64(b + 32), 0);
    decode(b, len, &d);
    assert_false(d.request_vote_result.vote_granted);
    assert_int_equal(d.request_vote_result.pre_vote, raft_tribool_false);
    /* A result of libraft before pre-votes (no flags word): "unknown". */
    b[8] = 16;
    decode(b, 16 + 16, &d);
    assert_int_equal(d.request_vote_result.pre_vote, raft_tribool_unknown);
    free(b);

    /* [type 2][H 24][term][rejected][last log index] */
    m = (struct raft_message){.type = RAFT_IO_APPEND_ENTRIES_RESULT,
                              .append_entries_result = {.term = 3, .rejected = 12,
                                                        .last_log_index = 11}};
    encode(&m, &b, &len);
    assert_int_equal(len, 16 + 24);
    assert_int_equal(le_get64(b + 0), 2);
    assert_int_equal(le_get64(b + 8), 24);
    assert_int_equal(le_get64(b + 16), 3);
    assert_int_equal(le_get64(b + 24), 12);
    assert_int_equal(le_get64(b + 32), 11);
    decode(b, len, &d);
    assert_int_equal(d.append_entries_result.term, 3);
    assert_int_equal(d.append_entries_result.rejected, 12);
    assert_int_equal(d.append_entries_result.last_log_index, 11);
    free(b);
}

/* A configuration of three servers as libraft encodes it (padded). */
static struct raft_buffer three_servers(struct raft_configuration *c)
{
    struct raft_buffer buf;
    raft_configuration_init(c);
    assert_int_equal(raft_configuration_add(c, 1, "127.0.0.1:7001", RAFT_VOTER), 0);
    assert_int_equal(raft_configuration_add(c, 0x100000002ull, "127.0.0.2:7002", RAFT_STANDBY),
                     0);
    assert_int_equal(raft_configuration_add(c, 3, "10.0.0.3:7003|http://10.0.0.3:8080",
                                            RAFT_SPARE), 0);
    assert_int_equal(raft_configuration_encode(c, &buf), 0);
    assert_int_equal(buf.len % 8, 0);
    return buf;
}

static void test_append_entries_match_and_decode_into_one_batch(void **state)
{
    (void)state;
    struct raft_configuration conf;
    struct raft_buffer cbuf = three_servers(&conf);
    uint8_t cmd[24], barrier[8] = {0};
    for (size_t i = 0; i < sizeof cmd; i++)
        cmd[i] = (uint8_t)(0xa0 + i);
    struct raft_entry es[3] = {
        {.term = 4, .type = RAFT_COMMAND, .buf = {cmd, sizeof cmd}},
        {.term = 4, .type = RAFT_BARRIER, .buf = {barrier, sizeof barrier}},
        {.term = 5, .type = RAFT_CHANGE, .buf = cbuf},
    };
    struct raft_message m = {.type = RAFT_IO_APPEND_ENTRIES,
                             .append_entries = {.term = 5, .prev_log_index = 20,
                                                .prev_log_term = 3, .leader_commit = 19,
                                                .entries = es, .n_entries = 3}};
    rw_entry we[3] = {{4, RW_ENTRY_COMMAND, cmd, sizeof cmd},
                      {4, RW_ENTRY_BARRIER, barrier, sizeof barrier},
                      {5, RW_ENTRY_CHANGE, cbuf.base, (uint32_t)cbuf.len}};
    rw_buf w = {0};
    rw_enc_append_entries(&w, &(rw_append_entries){.term = 5, .prev_index = 20, .prev_term = 3,
                                                   .commit = 19, .entries = we,
                                                   .n_entries = 3});
    same_bytes(&m, &w);

    struct raft_message d;
    decode(w.data, w.len, &d);
    struct raft_append_entries *a = &d.append_entries;
    assert_int_equal(d.type, RAFT_IO_APPEND_ENTRIES);
    assert_int_equal(a->term, 5);
    assert_int_equal(a->prev_log_index, 20);
    assert_int_equal(a->prev_log_term, 3);
    assert_int_equal(a->leader_commit, 19);
    assert_int_equal(a->n_entries, 3);
    for (unsigned i = 0; i < 3; i++) {
        assert_int_equal(a->entries[i].term, es[i].term);
        assert_int_equal(a->entries[i].type, es[i].type);
        assert_int_equal(a->entries[i].buf.len, es[i].buf.len);
        assert_memory_equal(a->entries[i].buf.base, es[i].buf.base, es[i].buf.len);
        /* libraft frees a received batch once, through entries[0].batch */
        assert_ptr_equal(a->entries[i].batch, a->entries[0].batch);
    }
    assert_ptr_equal(a->entries[0].buf.base, a->entries[0].batch);
    raft_codec_free(&d);
    rw_buf_free(&w);

    /* A heartbeat: no entries, no payload. */
    m.append_entries.n_entries = 0;
    m.append_entries.entries = NULL;
    rw_enc_append_entries(&w, &(rw_append_entries){.term = 5, .prev_index = 20, .prev_term = 3,
                                                   .commit = 19});
    same_bytes(&m, &w);
    decode(w.data, w.len, &d);
    assert_int_equal(d.append_entries.n_entries, 0);
    assert_null(d.append_entries.entries);
    raft_codec_free(&d);
    rw_buf_free(&w);
    raft_free(cbuf.base);
    raft_configuration_close(&conf);
}

static void test_install_snapshot_matches_and_decodes_its_configuration(void **state)
{
    (void)state;
    struct raft_configuration conf;
    struct raft_buffer cbuf = three_servers(&conf);
    raft_free(cbuf.base);
    uint8_t image[100];
    for (size_t i = 0; i < sizeof image; i++)
        image[i] = (uint8_t)(i * 7);
    struct raft_message m = {.type = RAFT_IO_INSTALL_SNAPSHOT,
                             .install_snapshot = {.term = 6, .last_index = 500, .last_term = 6,
                                                  .conf = conf, .conf_index = 480,
                                                  .data = {image, sizeof image}}};
    rw_server ws[3] = {{1, "127.0.0.1:7001", RAFT_VOTER},
                       {0x100000002ull, "127.0.0.2:7002", RAFT_STANDBY},
                       {3, "10.0.0.3:7003|http://10.0.0.3:8080", RAFT_SPARE}};
    rw_buf w = {0};
    rw_enc_install_snapshot(&w, &(rw_install_snapshot){.term = 6, .last_index = 500,
                                                       .last_term = 6, .conf_index = 480,
                                                       .servers = ws, .n_servers = 3,
                                                       .data = image, .len = sizeof image});
    same_bytes(&m, &w);

    struct raft_message d;
    decode(w.data, w.len, &d);
    struct raft_install_snapshot *s = &d.install_snapshot;
    assert_int_equal(d.type, RAFT_IO_INSTALL_SNAPSHOT);
    assert_int_equal(s->term, 6);
    assert_int_equal(s->last_index, 500);
    assert_int_equal(s->last_term, 6);
    assert_int_equal(s->conf_index, 480);
    assert_int_equal(s->conf.n, 3);
    for (unsigned i = 0; i < 3; i++) {
        assert_int_equal(s->conf.servers[i].id, ws[i].id);
        assert_string_equal(s->conf.servers[i].address, ws[i].address);
        assert_int_equal(s->conf.servers[i].role, ws[i].role);
    }
    assert_int_equal(s->data.len, sizeof image);
    assert_memory_equal(s->data.base, image, sizeof image);
    raft_codec_free(&d);
    rw_buf_free(&w);
    raft_configuration_close(&conf);
}

static void test_what_the_check_or_libraft_would_refuse_is_refused(void **state)
{
    (void)state;
    uint8_t *b;
    size_t len;
    const char *why = NULL;
    struct raft_message d;
    uint8_t cmd[16] = {1, 2, 3};
    struct raft_entry e = {.term = 2, .type = RAFT_COMMAND, .buf = {cmd, sizeof cmd}};
    struct raft_message m = {.type = RAFT_IO_APPEND_ENTRIES,
                             .append_entries = {.term = 2, .prev_log_index = 1,
                                                .prev_log_term = 1, .leader_commit = 1,
                                                .entries = &e, .n_entries = 1}};
    encode(&m, &b, &len);

    /* cut anywhere, or with a second message after it */
    for (size_t cut = 0; cut < len; cut++)
        assert_int_equal(raft_codec_decode(b, cut, NULL, &d, &why), -1);
    uint8_t *two = malloc(2 * len);
    assert_non_null(two);
    memcpy(two, b, len);
    memcpy(two + len, b, len);
    assert_int_equal(raft_codec_decode(two, 2 * len, NULL, &d, &why), -1);
    assert_string_equal(why, "not exactly one message");
    free(two);

    /* the frame check's reasons come through: an unknown entry type, an
     * entry above the limit given */
    b[16 + 40 + 8] = 9;
    assert_int_equal(raft_codec_decode(b, len, NULL, &d, &why), -1);
    assert_string_equal(why, "AppendEntries: unknown entry type");
    b[16 + 40 + 8] = RAFT_COMMAND;
    decode(b, len, &d);
    raft_codec_free(&d);
    raft_frame_limits small = {.max_entry_bytes = 8};
    assert_int_equal(raft_codec_decode(b, len, &small, &d, &why), -1);
    assert_string_equal(why, "AppendEntries: entry above the limit");
    free(b);

    /* libraft sends no entry whose length is not a multiple of 8, no empty
     * one, no empty image, no unknown type */
    e.buf.len = 5;
    assert_int_equal(raft_codec_encode(&m, &b, &len, &why), -1);
    assert_null(b);
    e.buf.len = 0;
    assert_int_equal(raft_codec_encode(&m, &b, &len, &why), -1);
    struct raft_message s = {.type = RAFT_IO_INSTALL_SNAPSHOT};
    raft_configuration_init(&s.install_snapshot.conf);
    assert_int_equal(raft_codec_encode(&s, &b, &len, &why), -1);
    struct raft_message u = {.type = 42};
    assert_int_equal(raft_codec_encode(&u, &b, &len, &why), -1);
    assert_string_equal(why, "an unknown message type");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_votes_and_timeout_match_an_encoder_written_apart),
        cmocka_unit_test(test_results_lie_where_libraft_reads_them),
        cmocka_unit_test(test_append_entries_match_and_decode_into_one_batch),
        cmocka_unit_test(test_install_snapshot_matches_and_decodes_its_configuration),
        cmocka_unit_test(test_what_the_check_or_libraft_would_refuse_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
