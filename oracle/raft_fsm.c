/*
 * raft_fsm.c — see raft_fsm.h. "advance" is 16 bytes: its tag in 8 bytes
 * (a later format is told apart by its tag), then n, big-endian.
 */
#include <stdlib.h>
#include <string.h>

#include "be.h"
#include "raft_fsm.h"

static const uint8_t TAG[8] = {'o', 'r', 'a', 'c', 'A', 'D', 'V', '1'};
/* The placement driver's commands, in oracle_pd_cmd's order. */
static const uint8_t PD_TAGS[3][8] = {{'o', 'r', 'a', 'c', 'P', 'D', 'N', '1'},
                                      {'o', 'r', 'a', 'c', 'P', 'D', 'I', '1'},
                                      {'o', 'r', 'a', 'c', 'P', 'D', 'R', '1'}};
/* An image with the placement driver's map. */
static const uint8_t IMAGE_TAG[8] = {'o', 'r', 'a', 'c', 'S', 'N', 'P', '2'};

int oracle_fsm_command(uint64_t n, struct raft_buffer *out)
{
    uint8_t *p = raft_malloc(16);
    if (p == NULL)
        return -1;
    memcpy(p, TAG, 8);
    be_put64(p + 8, n);
    out->base = p;
    out->len = 16;
    return 0;
}

/* A placement-driver command is its tag, the length of its bytes (8
 * bytes), the bytes, and zeros to a multiple of 8 bytes: libraft 0.15
 * stores entries padded so, and at a restart finds an entry that follows
 * one of another length at the wrong offset (service/raft_group.c). */
int oracle_fsm_pd_command(oracle_pd_cmd cmd, const buf *bytes, struct raft_buffer *out)
{
    size_t len = (16 + bytes->len + 7) / 8 * 8;
    uint8_t *p = raft_malloc(len);
    if (p == NULL)
        return -1;
    memset(p, 0, len);
    memcpy(p, PD_TAGS[cmd], 8);
    be_put64(p + 8, bytes->len);
    if (bytes->len)
        memcpy(p + 16, bytes->data, bytes->len);
    out->base = p;
    out->len = len;
    return 0;
}

void oracle_fsm_command_free(struct raft_buffer *buf)
{
    raft_free(buf->base);
    buf->base = NULL;
}

/* A placement-driver command: what pd_apply_* gave (0 without a map, or
 * when it is malformed). */
static uint64_t apply_pd(oracle_fsm_state *st, const uint8_t *p, size_t len)
{
    if (st->pd == NULL || len < 16 || len % 8 != 0)
        return 0;
    uint64_t n = be_get64(p + 8);
    if (n > len - 16 || len - 16 - n >= 8)
        return 0; /* not the padding of a command of ours */
    if (memcmp(p, PD_TAGS[ORACLE_PD_NODE], 8) == 0)
        return pd_apply_node(st->pd, p + 16, n);
    if (memcmp(p, PD_TAGS[ORACLE_PD_IDS], 8) == 0)
        return pd_apply_ids(st->pd, p + 16, n);
    if (memcmp(p, PD_TAGS[ORACLE_PD_REGIONS], 8) == 0)
        return pd_apply_regions(st->pd, p + 16, n);
    return 0;
}

static int apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    oracle_fsm_state *st = fsm->data;
    const uint8_t *p = buf->base;
    uint64_t first = 0;

    st->applied++;
    if (buf->len != 16 || memcmp(p, TAG, 8) != 0) {
        *result = (void *)(uintptr_t)apply_pd(st, p, buf->len);
        return 0;
    }
    /* A command that cannot be applied changes nothing, on every node
     * alike (each sees the same bytes and the same mark). */
    uint64_t n = be_get64(p + 8);
    if (n > 0 && n <= ORACLE_FSM_MAX_TS && st->hwm <= ORACLE_FSM_MAX_TS - n) {
        first = st->hwm + 1;
        st->hwm += n;
    }
    *result = (void *)(uintptr_t)first;
    return 0;
}

/* The image: the mark alone without a map, else the tag, the mark and
 * the map (pd_map_encode). */
static int snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n_bufs)
{
    oracle_fsm_state *st = fsm->data;
    buf img = BUF_INIT;
    uint8_t mark[8];
    be_put64(mark, st->hwm);
    int rc = st->pd == NULL ? buf_append(&img, mark, 8)
                            : buf_append(&img, IMAGE_TAG, 8) || buf_append(&img, mark, 8) ||
                                  pd_map_encode(st->pd, &img);
    struct raft_buffer *b = raft_malloc(sizeof(*b));
    uint8_t *p = rc == 0 ? raft_malloc(img.len) : NULL;
    if (b == NULL || p == NULL) {
        raft_free(b);
        raft_free(p);
        buf_free(&img);
        return RAFT_NOMEM;
    }
    memcpy(p, img.data, img.len);
    b->base = p;
    b->len = img.len;
    buf_free(&img);
    *bufs = b;
    *n_bufs = 1;
    return 0;
}

static int restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    oracle_fsm_state *st = fsm->data;
    const uint8_t *p = buf->base;
    bool mapped = buf->len >= 16 && memcmp(p, IMAGE_TAG, 8) == 0;
    if (buf->len != 8 && !mapped)
        return RAFT_MALFORMED;
    /* The mark never goes down: a member installs an image only when its
     * log is behind it, so the image's mark is at least its own; a lower
     * one is forged, and taking it would hand out timestamps twice. */
    uint64_t image = be_get64(mapped ? p + 8 : p);
    /* Nor past the cap no command can pass: such an image is forged too
     * (a fuzzed peer's; /v1/health would show a negative mark). */
    if (image > ORACLE_FSM_MAX_TS)
        return RAFT_MALFORMED;
    /* The map is the image's, whole (a member without a map checks it
     * all the same, on a scratch map). An image of the mark alone, from
     * a member before the placement driver, carries an empty map. */
    static const uint8_t EMPTY[16] = {0, 0, 0, 0, 0, 0, 0, 1}; /* next id 1, no node, no region */
    const uint8_t *mp = mapped ? p + 16 : EMPTY;
    size_t mlen = mapped ? buf->len - 16 : sizeof EMPTY;
    pd_map *scratch = st->pd == NULL ? pd_map_new() : NULL;
    pd_map *into = st->pd != NULL ? st->pd : scratch;
    int rc = into != NULL && pd_map_restore(into, mp, mlen) == 0 ? 0 : RAFT_MALFORMED;
    pd_map_free(scratch);
    if (rc != 0)
        return rc;
    if (image > st->hwm)
        st->hwm = image;
    raft_free(buf->base); /* restore owns the buffer */
    return 0;
}

void oracle_fsm_init(struct raft_fsm *fsm, oracle_fsm_state *st, pd_map *pd)
{
    memset(fsm, 0, sizeof(*fsm));
    memset(st, 0, sizeof(*st));
    st->pd = pd;
    fsm->version = 1;
    fsm->data = st;
    fsm->apply = apply;
    fsm->snapshot = snapshot;
    fsm->restore = restore;
}
