/*
 * fuzz_pd.c — oracle/pd_map.c: the placement driver's commands and
 * images on any bytes.
 *
 * Input: a seed map is built first (two nodes, ids, three regions), then
 * the input is read as commands: one byte picks the kind (node, ids,
 * regions, an image to restore), two the length, then that many bytes.
 * After every command the map re-read from its own image is the same
 * bytes (sorted, disjoint, no id twice: pd_map_restore refuses any
 * other), every region it lists is found again by id and by its start
 * key, and a command that was refused left the image as it was.
 */
#include <string.h>

#include "fuzz.h"
#include "pd_map.h"

static buf image_of(pd_map *m)
{
    buf b = BUF_INIT;
    FUZZ_CHECK(pd_map_encode(m, &b) == 0);
    return b;
}

typedef struct {
    pd_region *rs;
    size_t n;
} copies;

/* pd_map_each's callback runs under the map's read lock: copy, check after. */
static void copy_out(void *arg, const pd_region *r)
{
    copies *c = arg;
    FUZZ_CHECK(pd_region_copy(&c->rs[c->n++], r) == 0);
}

static void check(pd_map *m)
{
    buf a = image_of(m);
    pd_map *copy = pd_map_new();
    FUZZ_CHECK(copy != NULL);
    FUZZ_CHECK(pd_map_restore(copy, (const uint8_t *)a.data, a.len) == 0);
    buf b = image_of(copy);
    FUZZ_CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
    pd_counts n;
    pd_map_counts(m, &n);
    copies c = {.rs = calloc(n.regions + 1, sizeof(pd_region))};
    FUZZ_CHECK(c.rs != NULL);
    pd_map_each(m, (const uint8_t *)"", 0, n.regions, copy_out, &c);
    for (size_t i = 0; i < c.n; i++) { /* each found again by id */
        FUZZ_CHECK(pd_map_holds(m, &c.rs[i]));
        pd_region_clear(&c.rs[i]);
    }
    free(c.rs);
    buf_free(&a);
    buf_free(&b);
    pd_map_free(copy);
}

static void seed(pd_map *m)
{
    buf b = BUF_INIT;
    char err[128];
    FUZZ_CHECK(pd_cmd_node(&b, "http://a", err, sizeof err) == 0);
    FUZZ_CHECK(pd_apply_node(m, (const uint8_t *)b.data, b.len) == 1);
    pd_region rs[3] = {
        {.id = 5, .version = 2, .conf_ver = 1, .start = (uint8_t *)"", .end = (uint8_t *)"g",
         .end_len = 1, .nreplicas = 1, .replicas = {1}},
        {.id = 6, .version = 2, .conf_ver = 1, .start = (uint8_t *)"g", .start_len = 1,
         .end = (uint8_t *)"p", .end_len = 1},
        {.id = 7, .version = 3, .conf_ver = 1, .start = (uint8_t *)"p", .start_len = 1,
         .end = (uint8_t *)""},
    };
    buf_reset(&b);
    FUZZ_CHECK(pd_cmd_regions(&b, rs, 3, err, sizeof err) == 0);
    FUZZ_CHECK(pd_apply_regions(m, (const uint8_t *)b.data, b.len) == 3);
    buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pd_map *m = pd_map_new();
    FUZZ_CHECK(m != NULL);
    seed(m);
    const uint8_t *p = data;
    size_t left = size;
    for (int round = 0; round < 16 && left > 0; round++) {
        unsigned kind = (unsigned)fuzz_take(&p, &left, 1) % 4;
        size_t n = (size_t)fuzz_take(&p, &left, 2);
        if (n > left)
            n = left;
        uint8_t *cmd = malloc(n ? n : 1); /* exact size: ASan sees a read past it */
        FUZZ_CHECK(cmd != NULL);
        memcpy(cmd, p, n);
        p += n;
        left -= n;
        buf before = image_of(m);
        uint64_t r = 0;
        int rc = 0;
        switch (kind) {
        case 0: r = pd_apply_node(m, cmd, n); break;
        case 1: r = pd_apply_ids(m, cmd, n); break;
        case 2: r = pd_apply_regions(m, cmd, n); break;
        default: rc = pd_map_restore(m, cmd, n); break;
        }
        if ((kind < 3 && r == 0) || (kind == 3 && rc != 0)) {
            buf after = image_of(m); /* refused: nothing changed */
            FUZZ_CHECK(after.len == before.len && memcmp(after.data, before.data, after.len) == 0);
            buf_free(&after);
        }
        buf_free(&before);
        free(cmd);
        check(m);
    }
    pd_map_free(m);
    return 0;
}
