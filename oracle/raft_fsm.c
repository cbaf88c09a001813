/*
 * raft_fsm.c — see raft_fsm.h. A command is 16 bytes: a tag ("ADV1") in 8
 * bytes for a later format to be told apart, then n, both big-endian.
 */
#include <string.h>

#include "raft_fsm.h"

static const uint8_t TAG[8] = {'o', 'r', 'a', 'c', 'A', 'D', 'V', '1'};

static void be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

int oracle_fsm_command(uint64_t n, struct raft_buffer *out)
{
    uint8_t *p = raft_malloc(16);
    if (p == NULL)
        return -1;
    memcpy(p, TAG, 8);
    be64(p + 8, n);
    out->base = p;
    out->len = 16;
    return 0;
}

static int apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    oracle_fsm_state *st = fsm->data;
    const uint8_t *p = buf->base;
    uint64_t first = 0;

    st->applied++;
    /* A command that cannot be applied changes nothing, on every node
     * alike (each sees the same bytes and the same mark). */
    if (buf->len == 16 && memcmp(p, TAG, 8) == 0) {
        uint64_t n = get_be64(p + 8);
        if (n > 0 && n <= ORACLE_FSM_MAX_TS && st->hwm <= ORACLE_FSM_MAX_TS - n) {
            first = st->hwm + 1;
            st->hwm += n;
        }
    }
    *result = (void *)(uintptr_t)first;
    return 0;
}

static int snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n_bufs)
{
    oracle_fsm_state *st = fsm->data;
    struct raft_buffer *b = raft_malloc(sizeof(*b));
    uint8_t *p = raft_malloc(8);
    if (b == NULL || p == NULL) {
        raft_free(b);
        raft_free(p);
        return RAFT_NOMEM;
    }
    be64(p, st->hwm);
    b->base = p;
    b->len = 8;
    *bufs = b;
    *n_bufs = 1;
    return 0;
}

static int restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    oracle_fsm_state *st = fsm->data;
    if (buf->len != 8)
        return RAFT_MALFORMED;
    /* The mark never goes down: a member installs an image only when its
     * log is behind it, so the image's mark is at least its own; a lower
     * one is forged, and taking it would hand out timestamps twice. */
    uint64_t image = get_be64(buf->base);
    /* Nor past the cap no command can pass: such an image is forged too
     * (a fuzzed peer's; /v1/health would show a negative mark). */
    if (image > ORACLE_FSM_MAX_TS)
        return RAFT_MALFORMED;
    if (image > st->hwm)
        st->hwm = image;
    raft_free(buf->base); /* restore owns the buffer */
    return 0;
}

void oracle_fsm_init(struct raft_fsm *fsm, oracle_fsm_state *st)
{
    memset(fsm, 0, sizeof(*fsm));
    memset(st, 0, sizeof(*st));
    fsm->version = 1;
    fsm->data = st;
    fsm->apply = apply;
    fsm->snapshot = snapshot;
    fsm->restore = restore;
}
