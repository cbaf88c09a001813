/*
 * test_region.c — regions and the router (service/region.c) and the keys
 * of a write batch (engine/batch_keys.c): a key is found in the one
 * region whose [start, end) holds it, ranges that overlap are refused, a
 * gap holds no key, a read of a range meets every region it overlaps and
 * no other, and a batch is for a region only when every key it writes is
 * in that region (or, cut before a split, in regions of one log: marked
 * stale); --region-split-keys is parsed and checked, its keys cut
 * the keyspace into contiguous regions, and a transaction's keys are cut
 * into runs of one region each (router_run); the region map (what a split
 * proposes and the store keeps) encodes and decodes to the same regions,
 * a malformed one is refused, a split's map and its installation keep the
 * regions it does not touch, and lookups go on safely while maps are
 * installed (a thread installing, others looking up: under ASan too).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "keyspace.h"
#include "region.h"

static region *R(uint64_t id, const char *start, const char *end)
{
    region *r = region_new(id, start, strlen(start), end, end != NULL ? strlen(end) : 0);
    assert_non_null(r);
    return r;
}

static uint64_t found(const router *rt, const char *key)
{
    region *r = router_find(rt, key, strlen(key));
    return r != NULL ? r->id : 0;
}

/* ["", b) [b, m) [m, ...), added out of order. */
static router *three(void)
{
    router *rt = router_new();
    assert_non_null(rt);
    assert_int_equal(router_add(rt, R(3, "m", NULL)), 0);
    assert_int_equal(router_add(rt, R(1, "", "b")), 0);
    assert_int_equal(router_add(rt, R(2, "b", "m")), 0);
    return rt;
}

static void a_key_is_in_the_region_whose_range_holds_it(void **state)
{
    (void)state;
    router *rt = three();
    assert_int_equal(router_count(rt), 3);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(router_at(rt, i)->id, i + 1); /* kept in key order */
    assert_null(router_at(rt, 3));
    assert_int_equal(found(rt, ""), 1);
    assert_int_equal(found(rt, "a"), 1);
    assert_int_equal(found(rt, "azzzz"), 1);
    assert_int_equal(found(rt, "b"), 2); /* a start is in its region */
    assert_int_equal(found(rt, "l\xff\xff"), 2);
    assert_int_equal(found(rt, "m"), 3); /* an end is not */
    assert_int_equal(found(rt, "\xff\xff\xff"), 3);
    char nul[2] = {'b', 0}; /* "b\0" sorts after "b": a prefix first */
    region *r = router_find(rt, nul, 2);
    assert_non_null(r);
    assert_int_equal(r->id, 2);
    router_free(rt);
}

static void overlapping_and_empty_ranges_are_refused(void **state)
{
    (void)state;
    router *rt = three();
    const char *overlaps[][2] = {{"a", "c"}, {"l", "n"}, {"", NULL}, {"c", "d"}, {"z", NULL}};
    for (size_t i = 0; i < sizeof overlaps / sizeof overlaps[0]; i++) {
        region *r = R(9, overlaps[i][0], overlaps[i][1]);
        assert_int_equal(router_add(rt, r), -1);
        region_free(r); /* refused: still the caller's */
    }
    assert_int_equal(router_count(rt), 3);
    assert_null(region_new(9, "b", 1, "b", 1)); /* empty */
    assert_null(region_new(9, "c", 1, "b", 1)); /* reversed */
    router_free(rt);
}

static void a_gap_between_regions_holds_no_key(void **state)
{
    (void)state;
    router *rt = router_new();
    assert_non_null(rt);
    assert_int_equal(router_add(rt, R(1, "a", "b")), 0);
    assert_int_equal(router_add(rt, R(2, "c", NULL)), 0);
    assert_int_equal(router_add(rt, R(3, "b", "c")), 0); /* fills the gap exactly */
    assert_int_equal(found(rt, "bb"), 3);
    router_free(rt);

    rt = router_new();
    assert_non_null(rt);
    assert_int_equal(router_add(rt, R(1, "a", "b")), 0);
    assert_int_equal(router_add(rt, R(2, "c", NULL)), 0);
    assert_int_equal(found(rt, ""), 0);   /* before the first */
    assert_int_equal(found(rt, "b"), 0);  /* between */
    assert_int_equal(found(rt, "bz"), 0);
    assert_int_equal(found(rt, "c"), 2);
    router_free(rt);
}

typedef struct {
    uint64_t ids[70];
    int n, stop_after; /* stop_after 0: never */
} overlap_seen;

static int note_region(void *arg, region *r)
{
    overlap_seen *o = arg;
    assert_true(o->n < 70);
    o->ids[o->n++] = r->id;
    return o->stop_after != 0 && o->n == o->stop_after;
}

/* The ids of the regions [start, end) overlaps, as "1,2,": end NULL for
 * no end. */
static const char *overlapping(const router *rt, const char *start, const char *end,
                               int stop_after)
{
    static char out[256];
    overlap_seen o = {.stop_after = stop_after};
    router_each_overlapping(rt, start, strlen(start), end, end != NULL ? strlen(end) : 0,
                            note_region, &o);
    out[0] = '\0';
    for (int i = 0; i < o.n; i++)
        snprintf(out + strlen(out), sizeof out - strlen(out), "%llu,",
                 (unsigned long long)o.ids[i]);
    return out;
}

static void a_range_meets_the_regions_it_overlaps(void **state)
{
    (void)state;
    router *rt = three(); /* ["", b) [b, m) [m, ...) */
    assert_string_equal(overlapping(rt, "", NULL, 0), "1,2,3,");
    assert_string_equal(overlapping(rt, "a", "c", 0), "1,2,");
    assert_string_equal(overlapping(rt, "c", "d", 0), "2,");
    assert_string_equal(overlapping(rt, "b", "m", 0), "2,"); /* m is the next one's start */
    assert_string_equal(overlapping(rt, "l", NULL, 0), "2,3,");
    assert_string_equal(overlapping(rt, "z", NULL, 0), "3,");
    assert_string_equal(overlapping(rt, "", NULL, 1), "1,"); /* fn stops it */
    router_free(rt);

    rt = router_new();
    assert_non_null(rt);
    assert_int_equal(router_add(rt, R(1, "a", "b")), 0);
    assert_int_equal(router_add(rt, R(2, "c", NULL)), 0);
    assert_string_equal(overlapping(rt, "b", "bz", 0), ""); /* inside the gap */
    assert_string_equal(overlapping(rt, "", "c\x01", 0), "1,2,");
    assert_string_equal(overlapping(rt, "", "a", 0), ""); /* before the first */
    router_free(rt);
}

/* Many regions at random split points: the binary search agrees with a
 * scan of every region on random keys. */
static void the_search_agrees_with_a_scan(void **state)
{
    (void)state;
    unsigned seed = 20261127;
    printf("# seed %u\n", seed);
    srand(seed);
    for (int round = 0; round < 20; round++) {
        /* Split points: distinct sorted two-byte keys. */
        char splits[64][2];
        int n = 0;
        for (int c = 1; c < 256 && n < 64; c++)
            if (rand() % 4 == 0) {
                splits[n][0] = (char)c;
                splits[n][1] = (char)(rand() % 256);
                n++;
            }
        router *rt = router_new();
        assert_non_null(rt);
        for (int i = n; i >= 0; i--) { /* added backwards */
            const void *start = i == 0 ? "" : splits[i - 1];
            region *r = region_new((uint64_t)i + 1, start, i == 0 ? 0 : 2,
                                   i == n ? NULL : splits[i], i == n ? 0 : 2);
            assert_non_null(r);
            assert_int_equal(router_add(rt, r), 0);
        }
        for (int k = 0; k < 500; k++) {
            unsigned char key[3] = {(unsigned char)(rand() % 256), (unsigned char)(rand() % 256),
                                    (unsigned char)(rand() % 256)};
            size_t len = (size_t)(rand() % 4);
            region *want = NULL;
            int holders = 0;
            for (size_t i = 0; i < router_count(rt); i++)
                if (region_contains(router_at(rt, i), key, len)) {
                    want = router_at(rt, i);
                    holders++;
                }
            assert_int_equal(holders, 1); /* they cover every key, once */
            assert_ptr_equal(router_find(rt, key, len), want);
            /* [key, key2): the regions a scan overlaps, against a scan
             * of every region (key2 empty: to the end). */
            unsigned char key2[2] = {(unsigned char)(rand() % 256), (unsigned char)(rand() % 256)};
            size_t len2 = (size_t)(rand() % 3);
            overlap_seen got = {0};
            router_each_overlapping(rt, key, len, len2 ? key2 : NULL, len2, note_region, &got);
            int m = 0;
            for (size_t i = 0; i < router_count(rt); i++) {
                region *r = router_at(rt, i);
                bool ends_after = r->unbounded || pc_key_cmp(r->end.data, r->end.len, key, len) > 0;
                bool starts_before = len2 == 0 || pc_key_cmp(r->start.data, r->start.len, key2, len2) < 0;
                if (ends_after && starts_before) {
                    assert_true(m < got.n);
                    assert_int_equal(got.ids[m], r->id);
                    m++;
                }
            }
            assert_int_equal(m, got.n);
        }
        router_free(rt);
    }
}

/* A batch as proposals write them: a lock, a data version, a write record
 * of key, and a notify row. */
static void write_key(pc_buf *b, const char *key, size_t len, uint64_t ts)
{
    uint8_t vk[PC_KEY_MAX + 16];
    size_t vklen = pc_vkey(vk, key, len, ts);
    assert_int_equal(pc_batch_put(b, 1, key, len, "L", 1), PC_OK);
    assert_int_equal(pc_batch_put(b, 0, vk, vklen, "value", 5), PC_OK);
    assert_int_equal(pc_batch_put(b, 2, vk, vklen, "W", 1), PC_OK);
    assert_int_equal(pc_batch_del(b, 3, key, len), PC_OK);
}

typedef struct {
    char seen[8][16];
    size_t len[8];
    int n;
} keys_seen;

static int note_key(void *arg, const void *key, size_t len)
{
    keys_seen *k = arg;
    assert_true(k->n < 8 && len <= 16);
    memcpy(k->seen[k->n], key, len);
    k->len[k->n++] = len;
    return 0;
}

static void a_batch_is_for_the_region_of_all_its_keys(void **state)
{
    (void)state;
    router *rt = three();
    pc_buf b = {0};
    write_key(&b, "c\0x", 3, 7); /* a zero byte: escaped in the versioned rows */
    assert_int_equal(pc_batch_raise_ts(&b, 9), PC_OK);
    keys_seen k = {0};
    assert_int_equal(pc_batch_keys(b.data, b.len, note_key, &k), PC_OK);
    assert_int_equal(k.n, 4); /* the raise has no key */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(k.len[i], 3);
        assert_memory_equal(k.seen[i], "c\0x", 3);
    }
    region *r = router_find_batch(rt, b.data, b.len, NULL);
    assert_non_null(r);
    assert_int_equal(r->id, 2);

    write_key(&b, "f", 1, 8); /* the same region still */
    assert_int_equal(router_find_batch(rt, b.data, b.len, NULL)->id, 2);
    write_key(&b, "x", 1, 8); /* and one in another, on the same log: a stale cut */
    bool stale = false;
    assert_int_equal(router_find_batch(rt, b.data, b.len, &stale)->id, 2);
    assert_true(stale);
    replicator logs[3];
    memset(logs, 0, sizeof logs);
    for (size_t i = 0; i < 3; i++) /* regions with logs of their own: refused */
        router_at(rt, i)->repl = &logs[i];
    assert_null(router_find_batch(rt, b.data, b.len, &stale));
    assert_false(stale);
    pc_buf_free(&b);

    pc_buf only_ts = {0};
    assert_int_equal(pc_batch_raise_ts(&only_ts, 3), PC_OK);
    assert_int_equal(router_find_batch(rt, only_ts.data, only_ts.len, NULL)->id, 1);
    pc_buf_free(&only_ts);

    const char junk[] = "not a batch";
    assert_null(router_find_batch(rt, junk, sizeof junk, NULL));
    assert_int_equal(pc_batch_keys(junk, sizeof junk, note_key, &k), PC_INVALID);
    router_free(rt);
}

static pc_buf B(const char *s)
{
    pc_buf b = {0};
    assert_int_equal(pc_buf_append(&b, s, strlen(s)), PC_OK);
    return b;
}

static void the_split_keys_cut_the_keyspace(void **state)
{
    (void)state;
    pc_buf cuts[3] = {B("ub"), B("um"), B("uz")};
    router *rt = router_split(cuts, 3);
    assert_non_null(rt);
    assert_int_equal(router_count(rt), 4);
    /* Contiguous: the first from the empty key (the service's own records,
     * 'a' to 'o', go there), each ends where the next starts, the last
     * runs to the end. */
    assert_int_equal(found(rt, ""), 1);
    assert_int_equal(found(rt, "afoo"), 1);
    assert_int_equal(found(rt, "ua"), 1);
    assert_int_equal(found(rt, "ub"), 2);
    assert_int_equal(found(rt, "ul\xff"), 2);
    assert_int_equal(found(rt, "um"), 3);
    assert_int_equal(found(rt, "uz"), 4);
    assert_int_equal(found(rt, "\xff\xff"), 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(router_at(rt, i)->id, i + 1);
        assert_int_equal(router_at(rt, i)->epoch, 1);
    }
    assert_true(router_at(rt, 3)->unbounded);
    router_free(rt);

    rt = router_split(NULL, 0); /* no cut: one region, every key */
    assert_int_equal(router_count(rt), 1);
    assert_int_equal(found(rt, ""), 1);
    assert_int_equal(found(rt, "\xff"), 1);
    router_free(rt);

    pc_buf swapped[2] = {cuts[1], cuts[0]}, twice[2] = {cuts[0], cuts[0]};
    assert_null(router_split(swapped, 2));
    assert_null(router_split(twice, 2));
    pc_buf empty = {0};
    assert_null(router_split(&empty, 1));
    for (int i = 0; i < 3; i++)
        pc_buf_free(&cuts[i]);
}

static void a_run_is_the_keys_of_the_first_keys_region(void **state)
{
    (void)state;
    router *rt = three(); /* ["", b) [b, m) [m, ...) */
    const char *keys[] = {"a", "b", "c", "l", "m", "z"};
    pc_mutation m[6];
    for (int i = 0; i < 6; i++)
        m[i] = (pc_mutation){PC_OP_PUT, {keys[i], strlen(keys[i])}, {"v", 1}};
    assert_int_equal(router_run(rt, m, 6), 1);     /* "a" alone in region 1 */
    assert_int_equal(router_run(rt, m + 1, 5), 3); /* b, c, l */
    assert_int_equal(router_run(rt, m + 4, 2), 2); /* m, z: the last runs on */
    assert_int_equal(router_run(rt, m + 1, 2), 2); /* bounded by n */
    assert_int_equal(router_run(rt, m, 0), 0);
    /* A primary first, out of key order: the run stops at the first key
     * outside the primary's region (the caller then starts a new batch). */
    pc_mutation p[3] = {m[2], m[0], m[3]};
    assert_int_equal(router_run(rt, p, 3), 1);
    router_free(rt);

    /* A key in no region: the whole rest, which the router then refuses
     * as one batch. */
    rt = router_new();
    assert_int_equal(router_add(rt, R(1, "m", NULL)), 0);
    assert_int_equal(router_run(rt, m, 6), 6);
    router_free(rt);
}

static void split_keys_are_parsed_and_checked(void **state)
{
    (void)state;
    pc_buf *k = NULL;
    size_t n = 99;
    char err[256];
    assert_int_equal(ks_split_keys("", &k, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
    assert_null(k);
    n = 99; /* a configuration built without flags (svc_config zeroed) */
    assert_int_equal(ks_split_keys(NULL, &k, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
    assert_null(k);

    assert_int_equal(ks_split_keys("acct%2F05,b%2Cc,z%00", &k, &n, err, sizeof err), 0);
    assert_int_equal(n, 3);
    assert_int_equal(k[0].len, 8);
    assert_memory_equal(k[0].data, "uacct/05", 8);
    assert_int_equal(k[1].len, 4);
    assert_memory_equal(k[1].data, "ub,c", 4);
    assert_int_equal(k[2].len, 3);
    assert_memory_equal(k[2].data, "uz\0", 3);
    for (size_t i = 0; i < n; i++)
        pc_buf_free(&k[i]);
    free(k);

    struct {
        const char *spec, *says;
    } bad[] = {
        {"b,a", "key 2 (\"a\") is not above"}, {"a,a", "key 2 (\"a\") is not above"},
        {"a,,b", "key 2 (\"\") is empty"},     {"a,", "key 2 (\"\") is empty"},
        {",a", "key 1 (\"\") is empty"},        {"a,%zz", "key 2 (\"%zz\") has a malformed"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        k = (pc_buf *)1;
        assert_int_equal(ks_split_keys(bad[i].spec, &k, &n, err, sizeof err), -1);
        assert_null(k);
        if (strstr(err, bad[i].says) == NULL)
            fail_msg("%s: \"%s\" does not say \"%s\"", bad[i].spec, err, bad[i].says);
    }

    /* Bounds: a key of 4,097 bytes, and 1,025 keys. */
    char *big = malloc(20000);
    assert_non_null(big);
    memset(big, 'k', 4097);
    big[4097] = '\0';
    assert_int_equal(ks_split_keys(big, &k, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "longer than 4096 bytes"));
    memset(big, 'k', 4096);
    big[4096] = '\0';
    assert_int_equal(ks_split_keys(big, &k, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(k[0].len, 4097);
    pc_buf_free(&k[0]);
    free(k);
    size_t off = 0;
    for (int i = 0; i < 1025; i++)
        off += (size_t)snprintf(big + off, 20000 - off, "%s%05d", i ? "," : "", i);
    assert_int_equal(ks_split_keys(big, &k, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "key 1025"));
    big[off - 6] = '\0'; /* 1,024 keys */
    assert_int_equal(ks_split_keys(big, &k, &n, err, sizeof err), 0);
    assert_int_equal(n, 1024);
    for (size_t i = 0; i < n; i++)
        pc_buf_free(&k[i]);
    free(k);
    free(big);
}

/* ---- the region map ---- */

/* "id:epoch:start|..." of a router's regions, in key order. */
static const char *shape(const router *rt)
{
    static char out[512];
    out[0] = '\0';
    for (size_t i = 0; i < router_count(rt); i++) {
        const region *r = router_at(rt, i);
        snprintf(out + strlen(out), sizeof out - strlen(out), "%llu:%llu:%.*s|",
                 (unsigned long long)r->id, (unsigned long long)r->epoch, (int)r->start.len,
                 (const char *)r->start.data);
    }
    return out;
}

static router *split_at(const char *const *keys, size_t n)
{
    pc_buf b[8];
    for (size_t i = 0; i < n; i++)
        b[i] = B(keys[i]);
    router *rt = router_split(b, n);
    for (size_t i = 0; i < n; i++)
        pc_buf_free(&b[i]);
    assert_non_null(rt);
    return rt;
}

static void a_split_is_a_map_every_member_installs_alike(void **state)
{
    (void)state;
    router *rt = split_at((const char *[]){"m"}, 1);
    region *left = router_at(rt, 0), *right = router_at(rt, 1);
    atomic_store(&left->nbatches, 7);
    char err[128] = "";
    pc_buf map = {0}, again = {0};
    assert_int_equal(router_split_map(rt, "f", 1, 0, &map, err, sizeof err), 0);
    /* Another member decodes the same map into the same regions. */
    router *other = router_decode(map.data, map.len);
    assert_non_null(other);
    assert_string_equal(shape(other), "1:2:|3:2:f|2:1:m|");
    assert_int_equal(router_encode(other, &again), 0);
    assert_int_equal(again.len, map.len);
    assert_memory_equal(again.data, map.data, map.len);
    assert_string_equal(shape(rt), "1:1:|2:1:m|"); /* proposing changes nothing */

    /* Each install that changes the map moves the generation a read's
     * epoch holds (replica.c); the same map again does not (the region
     * maker of --region-logs installs the rows after every image). */
    uint64_t gen = router_generation(rt);
    assert_int_equal(router_install(rt, map.data, map.len, NULL, NULL), 0);
    assert_int_equal(router_generation(rt), gen + 1);
    assert_string_equal(shape(rt), "1:2:|3:2:f|2:1:m|");
    region *kept_left = router_at(rt, 0);
    assert_int_equal(router_install(rt, map.data, map.len, NULL, NULL), 0);
    assert_int_equal(router_generation(rt), gen + 1);
    assert_ptr_equal(router_at(rt, 0), kept_left);
    assert_ptr_equal(router_at(rt, 2), right); /* untouched: the same region */
    assert_ptr_not_equal(router_at(rt, 0), left);
    assert_int_equal(atomic_load(&router_at(rt, 0)->nbatches), 7); /* counted on */
    /* The retired region is still whole for whoever holds it. */
    assert_true(region_contains(left, "g", 1));
    assert_int_equal(found(rt, "g"), 3);
    assert_int_equal(found(rt, "e"), 1);
    /* The same map again changes nothing. */
    region *mid = router_at(rt, 1);
    assert_int_equal(router_install(rt, map.data, map.len, NULL, NULL), 0);
    assert_ptr_equal(router_at(rt, 1), mid);

    /* Refused splits; a check alone (no map out) refuses alike and
     * takes what the split would. */
    assert_int_equal(router_split_map(rt, "f", 1, 0, &again, err, sizeof err), -1);
    assert_non_null(strstr(err, "region 3 starts at that key already"));
    err[0] = '\0';
    assert_int_equal(router_split_map(rt, "f", 1, 0, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "region 3 starts at that key already"));
    assert_int_equal(router_split_map(rt, "g", 1, 0, NULL, err, sizeof err), 0);
    assert_int_equal(router_split_map(rt, "g", 1, 2, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "below the map's next id 4"));
    assert_string_equal(shape(rt), "1:2:|3:2:f|2:1:m|");
    assert_int_equal(router_split_map(rt, "", 0, 0, &again, err, sizeof err), -1);
    assert_non_null(strstr(err, "no region holds"));
    /* The next split gets the next id, and the last region can split. */
    assert_int_equal(router_split_map(rt, "t", 1, 0, &again, err, sizeof err), 0);
    assert_int_equal(router_install(rt, again.data, again.len, NULL, NULL), 0);
    assert_string_equal(shape(rt), "1:2:|3:2:f|2:2:m|4:2:t|");
    assert_true(router_at(rt, 3)->unbounded);
    /* An id the placement driver handed out: taken, and the next id
     * passes it; one below the next id is refused (it may be in use). */
    assert_int_equal(router_next_id(rt), 5);
    pc_buf_free(&again);
    assert_int_equal(router_split_map(rt, "p", 1, 4, &again, err, sizeof err), -1);
    assert_non_null(strstr(err, "below the map's next id 5"));
    assert_int_equal(router_split_map(rt, "p", 1, 100, &again, err, sizeof err), 0);
    assert_int_equal(router_install(rt, again.data, again.len, NULL, NULL), 0);
    assert_string_equal(shape(rt), "1:2:|3:2:f|2:3:m|100:3:p|4:2:t|");
    assert_int_equal(router_next_id(rt), 101);
    pc_buf_free(&again);
    assert_int_equal(router_split_map(rt, "u", 1, 0, &again, err, sizeof err), 0);
    assert_int_equal(router_install(rt, again.data, again.len, NULL, NULL), 0);
    assert_string_equal(shape(rt), "1:2:|3:2:f|2:3:m|100:3:p|4:3:t|101:3:u|");
    router_free(other);
    pc_buf_free(&map);
    pc_buf_free(&again);
    router_free(rt);
}

static void a_map_full_of_regions_takes_no_split(void **state)
{
    (void)state;
    size_t n = ROUTER_MAX_REGIONS - 1;
    pc_buf *keys = calloc(n, sizeof(*keys));
    assert_non_null(keys);
    for (size_t i = 0; i < n; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%06zu", i);
        keys[i] = B(k);
    }
    router *rt = router_split(keys, n);
    assert_non_null(rt);
    char err[128] = "";
    pc_buf map = {0};
    assert_int_equal(router_split_map(rt, "k000000x", 8, 0, &map, err, sizeof err), -1);
    assert_non_null(strstr(err, "the most there may be"));
    assert_int_equal(router_encode(rt, &map), 0);
    router *back = router_decode(map.data, map.len);
    assert_non_null(back);
    assert_int_equal(router_count(back), ROUTER_MAX_REGIONS);
    router_free(back);
    for (size_t i = 0; i < n; i++)
        pc_buf_free(&keys[i]);
    free(keys);
    pc_buf_free(&map);
    router_free(rt);
}

static void put32(pc_buf *b, uint32_t v)
{
    uint8_t p[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    assert_int_equal(pc_buf_append(b, p, 4), PC_OK);
}

static void put64(pc_buf *b, uint64_t v)
{
    put32(b, (uint32_t)(v >> 32));
    put32(b, (uint32_t)v);
}

/* A map of count regions with these ids, epochs and starts. */
static pc_buf map_of(uint64_t next_id, uint32_t count, const uint64_t *ids, const uint64_t *epochs,
                     const char *const *starts)
{
    pc_buf b = B("pcR1");
    put64(&b, next_id);
    put32(&b, count);
    for (uint32_t i = 0; i < count; i++) {
        put64(&b, ids[i]);
        put64(&b, epochs[i]);
        put32(&b, (uint32_t)strlen(starts[i]));
        assert_int_equal(pc_buf_append(&b, starts[i], strlen(starts[i])), PC_OK);
    }
    return b;
}

static void a_malformed_map_is_refused(void **state)
{
    (void)state;
    const uint64_t ids[] = {1, 2, 3}, ones[] = {1, 1, 1};
    const char *const starts[] = {"", "b", "c"};
    pc_buf good = map_of(4, 3, ids, ones, starts);
    router *rt = router_decode(good.data, good.len);
    assert_non_null(rt);
    assert_string_equal(shape(rt), "1:1:|2:1:b|3:1:c|");
    for (size_t n = 0; n < good.len; n++) /* cut short anywhere */
        assert_null(router_decode(good.data, n));
    assert_int_equal(pc_buf_append(&good, "x", 1), PC_OK); /* bytes after it */
    assert_null(router_decode(good.data, good.len));
    struct {
        uint64_t next;
        uint32_t count;
        uint64_t ids[3], epochs[3];
        const char *starts[3];
    } bad[] = {
        {4, 3, {1, 2, 3}, {1, 1, 1}, {"a", "b", "c"}}, /* the first not at "" */
        {4, 3, {1, 2, 3}, {1, 1, 1}, {"", "c", "b"}},  /* out of order */
        {4, 3, {1, 2, 3}, {1, 1, 1}, {"", "b", "b"}},  /* a repeated start */
        {4, 3, {1, 2, 2}, {1, 1, 1}, {"", "b", "c"}},  /* a repeated id */
        {3, 3, {1, 2, 3}, {1, 1, 1}, {"", "b", "c"}},  /* an id at the next id */
        {4, 3, {1, 0, 3}, {1, 1, 1}, {"", "b", "c"}},  /* id 0 */
        {4, 3, {1, 2, 3}, {1, 0, 1}, {"", "b", "c"}},  /* epoch 0 */
        {4, 0, {1, 2, 3}, {1, 1, 1}, {"", "b", "c"}},  /* no region */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pc_buf m = map_of(bad[i].next, bad[i].count, bad[i].ids, bad[i].epochs, bad[i].starts);
        assert_null(router_decode(m.data, m.len));
        /* Installing it changes nothing, the generation neither. */
        uint64_t gen = router_generation(rt);
        assert_int_equal(router_install(rt, m.data, m.len, NULL, NULL), -1);
        assert_string_equal(shape(rt), "1:1:|2:1:b|3:1:c|");
        assert_int_equal(router_generation(rt), gen);
        pc_buf_free(&m);
    }
    pc_buf_free(&good);
    router_free(rt);
}

/* ---- installs while others look up ---- */

#define INSTALLS 2000
#define SPLITS 20

typedef struct {
    router *rt;
    _Atomic bool done;
    _Atomic long lookups;
} race;

static int count_region(void *arg, region *r)
{
    int *n = arg;
    assert_true(r->epoch >= 1);
    (*n)++;
    return 0;
}

static void *look_up(void *arg)
{
    race *x = arg;
    while (!atomic_load(&x->done)) {
        for (int i = 0; i < 64; i++) {
            char k[8];
            snprintf(k, sizeof k, "k%02d", (i * 7) % 64);
            region *r = router_find(x->rt, k, strlen(k));
            assert_non_null(r); /* the maps cover every key */
            assert_true(region_contains(r, k, strlen(k))); /* valid, perhaps retired */
            int seen = 0;
            router_each_overlapping(x->rt, "", 0, NULL, 0, count_region, &seen);
            assert_true(seen >= 1);
            region **all = NULL;
            size_t n = router_list(x->rt, &all);
            assert_true(n == 1 || n == SPLITS + 1);
            free(all);
            atomic_fetch_add(&x->lookups, 1);
        }
    }
    return NULL;
}

static void lookups_go_on_while_maps_are_installed(void **state)
{
    (void)state;
    /* Two maps: one region, and SPLITS + 1 regions (more than a chunk of
     * router_each_overlapping), installed in turn. */
    router *one = router_new(), *many = NULL;
    assert_non_null(one);
    assert_int_equal(router_add(one, R(1, "", NULL)), 0);
    router_at(one, 0)->epoch = 1;
    pc_buf m1 = {0}, m2 = {0};
    assert_int_equal(router_encode(one, &m1), 0);
    pc_buf keys[SPLITS];
    for (int i = 0; i < SPLITS; i++) {
        char k[8];
        snprintf(k, sizeof k, "k%02d", i * 3);
        keys[i] = B(k);
    }
    assert_non_null(many = router_split(keys, SPLITS));
    assert_int_equal(router_encode(many, &m2), 0);
    int all = 0;
    router_each_overlapping(many, "", 0, NULL, 0, count_region, &all);
    assert_int_equal(all, SPLITS + 1);

    race x = {.rt = one};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, look_up, &x), 0);
    for (int i = 0; i < INSTALLS; i++) {
        const pc_buf *m = i % 2 ? &m1 : &m2;
        assert_int_equal(router_install(one, m->data, m->len, NULL, NULL), 0);
    }
    atomic_store(&x.done, true);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    assert_true(atomic_load(&x.lookups) > 0);
    assert_int_equal(router_count(one), 1);
    for (int i = 0; i < SPLITS; i++)
        pc_buf_free(&keys[i]);
    pc_buf_free(&m1);
    pc_buf_free(&m2);
    router_free(many);
    router_free(one);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_key_is_in_the_region_whose_range_holds_it),
        cmocka_unit_test(overlapping_and_empty_ranges_are_refused),
        cmocka_unit_test(a_gap_between_regions_holds_no_key),
        cmocka_unit_test(a_range_meets_the_regions_it_overlaps),
        cmocka_unit_test(the_search_agrees_with_a_scan),
        cmocka_unit_test(a_batch_is_for_the_region_of_all_its_keys),
        cmocka_unit_test(the_split_keys_cut_the_keyspace),
        cmocka_unit_test(a_run_is_the_keys_of_the_first_keys_region),
        cmocka_unit_test(split_keys_are_parsed_and_checked),
        cmocka_unit_test(a_split_is_a_map_every_member_installs_alike),
        cmocka_unit_test(a_map_full_of_regions_takes_no_split),
        cmocka_unit_test(a_malformed_map_is_refused),
        cmocka_unit_test(lookups_go_on_while_maps_are_installed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
