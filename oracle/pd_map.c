/*
 * pd_map.c — see pd_map.h. The regions are an array sorted by start key
 * (lookups by binary search) with an index by id beside it; a command that
 * changes the map builds the next array in one merge, O(regions), which is
 * cheap next to the Raft round that carried it (a report that changes
 * nothing is not proposed: pd_map_holds). Big-endian integers, as every
 * other command and image of the project.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_map.h"

struct pd_map {
    pthread_rwlock_t lock;
    uint64_t next_id;          /* the next id to hand out (ids start at 1) */
    pd_node *nodes;            /* sorted by id (handed out in order) */
    size_t nnodes;
    pd_region *regions;        /* sorted by start, disjoint */
    size_t nregions;
    int64_t *by_id;            /* open addressing: index into regions, -1 empty */
    size_t by_id_cap;          /* a power of two, at least twice nregions */
};

/* ---- bytes ---- */

typedef struct {
    const uint8_t *p;
    size_t left;
    bool bad;
} reader;

static uint64_t get(reader *r, size_t n)
{
    uint64_t v = 0;
    if (r->bad || r->left < n) {
        r->bad = true;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        v = v << 8 | r->p[i];
    r->p += n;
    r->left -= n;
    return v;
}

static const uint8_t *get_bytes(reader *r, size_t n)
{
    if (r->bad || r->left < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

static int put(buf *b, uint64_t v, size_t n)
{
    uint8_t x[8];
    for (size_t i = 0; i < n; i++)
        x[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    return buf_append(b, x, n);
}

/* ---- keys and regions ---- */

static int key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    return c != 0 ? c : (alen > blen) - (alen < blen);
}

/* Whether key lies before r's end (every key does when r has none). */
static bool before_end(const uint8_t *key, size_t len, const pd_region *r)
{
    return r->end_len == 0 || key_cmp(key, len, r->end, r->end_len) < 0;
}

static bool overlap(const pd_region *a, const pd_region *b)
{
    return before_end(a->start, a->start_len, b) && before_end(b->start, b->start_len, a);
}

bool pd_region_valid(const pd_region *r)
{
    if (r->id == 0 || r->id > PD_MAX_ID || r->start_len > PD_MAX_KEY ||
        r->end_len > PD_MAX_KEY || r->nreplicas > PD_MAX_REPLICAS)
        return false;
    for (uint32_t i = 0; i < r->nreplicas; i++)
        if (r->replicas[i] == 0 || r->replicas[i] > PD_MAX_ID)
            return false;
    return r->end_len == 0 || key_cmp(r->start, r->start_len, r->end, r->end_len) < 0;
}

void pd_region_clear(pd_region *r)
{
    free(r->start);
    free(r->end);
    r->start = r->end = NULL;
}

static uint8_t *dup_bytes(const uint8_t *p, size_t n)
{
    uint8_t *d = malloc(n ? n : 1);
    if (d != NULL && n)
        memcpy(d, p, n);
    return d;
}

int pd_region_copy(pd_region *dst, const pd_region *src)
{
    *dst = *src;
    dst->start = dup_bytes(src->start, src->start_len);
    dst->end = dup_bytes(src->end, src->end_len);
    if (dst->start == NULL || dst->end == NULL) {
        pd_region_clear(dst);
        return -1;
    }
    return 0;
}

bool pd_region_equal(const pd_region *a, const pd_region *b)
{
    return a->id == b->id && a->version == b->version && a->conf_ver == b->conf_ver &&
           key_cmp(a->start, a->start_len, b->start, b->start_len) == 0 &&
           a->end_len == b->end_len && key_cmp(a->end, a->end_len, b->end, b->end_len) == 0 &&
           a->nreplicas == b->nreplicas &&
           memcmp(a->replicas, b->replicas, a->nreplicas * sizeof a->replicas[0]) == 0;
}

static int put_region(buf *b, const pd_region *r)
{
    if (put(b, r->id, 8) || put(b, r->version, 8) || put(b, r->conf_ver, 8) ||
        put(b, r->start_len, 4) || buf_append(b, r->start, r->start_len) ||
        put(b, r->end_len, 4) || buf_append(b, r->end, r->end_len) || put(b, r->nreplicas, 4))
        return -1;
    for (uint32_t i = 0; i < r->nreplicas; i++)
        if (put(b, r->replicas[i], 8))
            return -1;
    return 0;
}

/* A region read from rd, its bounds pointing into rd's bytes (not owned).
 * false when it does not decode or is not valid. */
static bool get_region(reader *rd, pd_region *r)
{
    memset(r, 0, sizeof *r);
    r->id = get(rd, 8);
    r->version = get(rd, 8);
    r->conf_ver = get(rd, 8);
    r->start_len = (uint32_t)get(rd, 4);
    if (rd->bad || r->start_len > PD_MAX_KEY)
        return false;
    r->start = (uint8_t *)get_bytes(rd, r->start_len);
    r->end_len = (uint32_t)get(rd, 4);
    if (rd->bad || r->end_len > PD_MAX_KEY)
        return false;
    r->end = (uint8_t *)get_bytes(rd, r->end_len);
    r->nreplicas = (uint32_t)get(rd, 4);
    if (rd->bad || r->nreplicas > PD_MAX_REPLICAS)
        return false;
    for (uint32_t i = 0; i < r->nreplicas; i++)
        r->replicas[i] = get(rd, 8);
    return !rd->bad && pd_region_valid(r);
}

/* ---- the map ---- */

pd_map *pd_map_new(void)
{
    pd_map *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    if (pthread_rwlock_init(&m->lock, NULL) != 0) {
        free(m);
        return NULL;
    }
    m->next_id = 1;
    return m;
}

static void free_regions(pd_region *rs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pd_region_clear(&rs[i]);
    free(rs);
}

void pd_map_free(pd_map *m)
{
    if (m == NULL)
        return;
    free(m->nodes);
    free_regions(m->regions, m->nregions);
    free(m->by_id);
    pthread_rwlock_destroy(&m->lock);
    free(m);
}

static size_t slot_of(uint64_t id, size_t cap)
{
    return (size_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (cap - 1);
}

/* The size of an index by id for n regions (0 for none). */
static size_t index_cap(size_t n)
{
    size_t c = 16;
    while (c < 2 * n)
        c *= 2;
    return n ? c : 0;
}

/* Fill ix (cap slots) as an index by id over rs; false when an id is
 * there twice. */
static bool index_ids(const pd_region *rs, size_t n, int64_t *ix, size_t cap)
{
    bool unique = true;
    if (cap == 0)
        return true;
    memset(ix, 0xff, cap * sizeof *ix);
    for (size_t i = 0; i < n; i++) {
        size_t s = slot_of(rs[i].id, cap);
        while (ix[s] >= 0) {
            if (rs[ix[s]].id == rs[i].id)
                unique = false;
            s = (s + 1) & (cap - 1);
        }
        ix[s] = (int64_t)i;
    }
    return unique;
}

/* The index in m->regions of the region with this id, -1 if none. */
static int64_t find_id(const pd_map *m, uint64_t id)
{
    if (m->by_id_cap == 0)
        return -1;
    for (size_t s = slot_of(id, m->by_id_cap);; s = (s + 1) & (m->by_id_cap - 1)) {
        int64_t i = m->by_id[s];
        if (i < 0 || m->regions[i].id == id)
            return i;
    }
}

/* The index of the last region starting at or before key, -1 if none. */
static int64_t floor_of(const pd_map *m, const uint8_t *key, size_t len)
{
    size_t lo = 0, hi = m->nregions; /* the answer is lo - 1 */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const pd_region *r = &m->regions[mid];
        if (key_cmp(r->start, r->start_len, key, len) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (int64_t)lo - 1;
}

/* The first stored region that overlaps r (m->nregions if none); the
 * overlapping ones follow it in order. */
static size_t first_overlap(const pd_map *m, const pd_region *r)
{
    int64_t f = floor_of(m, r->start, r->start_len);
    if (f >= 0 && overlap(&m->regions[f], r))
        return (size_t)f;
    return (size_t)(f + 1);
}

/* ---- commands ---- */

int pd_cmd_node(buf *out, const char *addr, char *err, size_t errlen)
{
    size_t n = strlen(addr);
    if (n == 0 || n >= PD_ADDR_MAX) {
        snprintf(err, errlen, "an address has 1 to %d bytes", PD_ADDR_MAX - 1);
        return -1;
    }
    return put(out, n, 4) || buf_append(out, addr, n) ? (snprintf(err, errlen, "out of memory"), -1)
                                                      : 0;
}

int pd_cmd_ids(buf *out, uint64_t count, char *err, size_t errlen)
{
    if (count == 0 || count > PD_MAX_IDS) {
        snprintf(err, errlen, "count must be 1 to %d", PD_MAX_IDS);
        return -1;
    }
    return put(out, count, 8) ? (snprintf(err, errlen, "out of memory"), -1) : 0;
}

int pd_cmd_regions(buf *out, const pd_region *regions, size_t n, char *err, size_t errlen)
{
    if (n == 0 || n > PD_MAX_REPORT) {
        snprintf(err, errlen, "a report holds 1 to %d regions", PD_MAX_REPORT);
        return -1;
    }
    if (put(out, n, 4)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!pd_region_valid(&regions[i])) {
            snprintf(err, errlen, "region %llu is malformed", (unsigned long long)regions[i].id);
            return -1;
        }
        if (put_region(out, &regions[i])) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    return 0;
}

/* An address is printable ASCII without spaces (a URL or host:port). */
static bool addr_valid(const uint8_t *p, size_t n)
{
    if (n == 0 || n >= PD_ADDR_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] <= ' ' || p[i] > '~')
            return false;
    return true;
}

/* The next n ids, or 0 when the counter would pass PD_MAX_ID. */
static uint64_t take_ids(pd_map *m, uint64_t n)
{
    if (n == 0 || m->next_id > PD_MAX_ID - n + 1)
        return 0;
    uint64_t first = m->next_id;
    m->next_id += n;
    return first;
}

uint64_t pd_apply_node(pd_map *m, const uint8_t *p, size_t len)
{
    reader rd = {p, len, false};
    size_t n = (size_t)get(&rd, 4);
    const uint8_t *a = rd.bad || n >= PD_ADDR_MAX ? NULL : get_bytes(&rd, n);
    if (a == NULL || rd.left != 0 || !addr_valid(a, n))
        return 0;
    pthread_rwlock_wrlock(&m->lock);
    uint64_t id = 0;
    for (size_t i = 0; i < m->nnodes && id == 0; i++)
        if (strlen(m->nodes[i].addr) == n && memcmp(m->nodes[i].addr, a, n) == 0)
            id = m->nodes[i].id; /* known: a restarted node keeps its id */
    if (id == 0 && m->nnodes < PD_MAX_NODES) {
        pd_node *grown = realloc(m->nodes, (m->nnodes + 1) * sizeof *grown);
        if (grown != NULL) {
            m->nodes = grown;
            id = take_ids(m, 1);
            if (id != 0) {
                pd_node *nd = &m->nodes[m->nnodes++];
                nd->id = id;
                memcpy(nd->addr, a, n);
                nd->addr[n] = '\0';
            }
        }
    }
    pthread_rwlock_unlock(&m->lock);
    return id;
}

uint64_t pd_apply_ids(pd_map *m, const uint8_t *p, size_t len)
{
    reader rd = {p, len, false};
    uint64_t n = get(&rd, 8);
    if (rd.bad || rd.left != 0 || n > PD_MAX_IDS)
        return 0;
    pthread_rwlock_wrlock(&m->lock);
    uint64_t first = take_ids(m, n);
    pthread_rwlock_unlock(&m->lock);
    return first;
}

/* A report's region and where it came in the command. */
typedef struct {
    pd_region r;
    size_t at;
} report;

static int by_start(const void *a, const void *b)
{
    const report *x = a, *y = b;
    int c = key_cmp(x->r.start, x->r.start_len, y->r.start, y->r.start_len);
    return c != 0 ? c : (x->at > y->at) - (x->at < y->at);
}

static int by_id(const void *a, const void *b)
{
    const report *x = a, *y = b;
    if (x->r.id != y->r.id)
        return (x->r.id > y->r.id) - (x->r.id < y->r.id);
    return (x->at > y->at) - (x->at < y->at);
}

/* Epoch order: version first (splits), then conf_ver (replica moves). */
static int epoch_cmp(const pd_region *a, const pd_region *b)
{
    if (a->version != b->version)
        return (a->version > b->version) - (a->version < b->version);
    return (a->conf_ver > b->conf_ver) - (a->conf_ver < b->conf_ver);
}

/* Whether the map takes report c (PD's rule), marking in gone the stored
 * regions it replaces: the region of its id and every region it overlaps,
 * all of an older epoch. Same epoch and same region: nothing to take. */
static bool takes(const pd_map *m, const pd_region *c, bool *gone)
{
    int64_t same = find_id(m, c->id);
    if (same >= 0 && epoch_cmp(c, &m->regions[same]) <= 0)
        return false; /* older, or the same epoch: unchanged (or a conflict, kept) */
    for (size_t i = first_overlap(m, c); i < m->nregions; i++) {
        const pd_region *o = &m->regions[i];
        if (!before_end(o->start, o->start_len, c))
            break;
        if (o->id != c->id && o->version >= c->version)
            return false; /* a region at least as new holds part of c's range */
    }
    if (same >= 0)
        gone[same] = true;
    for (size_t i = first_overlap(m, c); i < m->nregions; i++) {
        if (!before_end(m->regions[i].start, m->regions[i].start_len, c))
            break;
        gone[i] = true;
    }
    return true;
}

/* The map after a command: the stored regions not gone and the taken
 * reports (copied), merged in start order. Everything that can fail is
 * allocated first. 0 or -1 (out of memory; the map unchanged). */
static int rebuild(pd_map *m, const bool *gone, const report *taken, size_t k)
{
    size_t kept = 0;
    for (size_t i = 0; i < m->nregions; i++)
        kept += !gone[i];
    size_t n = kept + k, cap = index_cap(n);
    pd_region *copies = calloc(k, sizeof *copies);
    pd_region *next = calloc(n, sizeof *next);
    int64_t *ix = cap ? malloc(cap * sizeof *ix) : NULL;
    size_t c = 0;
    while (copies != NULL && c < k && pd_region_copy(&copies[c], &taken[c].r) == 0)
        c++;
    if (copies == NULL || next == NULL || (cap && ix == NULL) || c < k) {
        if (copies != NULL)
            free_regions(copies, c);
        free(next);
        free(ix);
        return -1;
    }
    size_t o = 0, i = 0, j = 0;
    while (i < m->nregions || j < k) {
        if (i < m->nregions && gone[i]) {
            pd_region_clear(&m->regions[i++]);
            continue;
        }
        bool stored = j == k || (i < m->nregions &&
                                 key_cmp(m->regions[i].start, m->regions[i].start_len,
                                         copies[j].start, copies[j].start_len) < 0);
        next[o++] = stored ? m->regions[i++] : copies[j++]; /* moved with its bounds */
    }
    index_ids(next, n, ix, cap); /* ids are unique: each taken one dropped its namesake */
    free(copies);
    free(m->regions);
    free(m->by_id);
    m->regions = next;
    m->nregions = n;
    m->by_id = ix;
    m->by_id_cap = cap;
    return 0;
}

/* Drop the reports that overlap an earlier one in start order or repeat
 * an id (a report of one leader never does; a forged one may): the first
 * in the command wins. Returns how many are left, in start order. */
static size_t drop_clashes(report *rs, size_t n)
{
    qsort(rs, n, sizeof *rs, by_id);
    for (size_t i = 1; i < n; i++)
        if (rs[i].r.id == rs[i - 1].r.id)
            rs[i].r.id = 0; /* marked */
    qsort(rs, n, sizeof *rs, by_start);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (rs[i].r.id == 0 || (k > 0 && overlap(&rs[k - 1].r, &rs[i].r)))
            continue;
        rs[k++] = rs[i];
    }
    return k;
}

uint64_t pd_apply_regions(pd_map *m, const uint8_t *p, size_t len)
{
    reader rd = {p, len, false};
    size_t n = (size_t)get(&rd, 4);
    if (rd.bad || n == 0 || n > PD_MAX_REPORT)
        return 0;
    report *rs = calloc(n, sizeof *rs);
    if (rs == NULL)
        return 0;
    for (size_t i = 0; i < n; i++) {
        rs[i].at = i;
        if (!get_region(&rd, &rs[i].r)) {
            free(rs);
            return 0;
        }
    }
    if (rd.left != 0) {
        free(rs);
        return 0;
    }
    size_t k = drop_clashes(rs, n), taken = 0;
    pthread_rwlock_wrlock(&m->lock);
    bool *gone = calloc(m->nregions + 1, sizeof *gone);
    if (gone != NULL) {
        for (size_t i = 0; i < k; i++)
            if (takes(m, &rs[i].r, gone))
                rs[taken++] = rs[i]; /* start order kept */
        size_t dropped = 0;
        for (size_t i = 0; i < m->nregions; i++)
            dropped += gone[i];
        /* Over the limit: the whole command is refused, alike everywhere. */
        if (taken > 0 && (m->nregions - dropped + taken > PD_MAX_REGIONS ||
                          rebuild(m, gone, rs, taken) != 0))
            taken = 0;
    }
    pthread_rwlock_unlock(&m->lock);
    free(gone);
    free(rs);
    return taken;
}

/* ---- images ---- */

int pd_map_encode(pd_map *m, buf *out)
{
    pthread_rwlock_rdlock(&m->lock);
    int rc = put(out, m->next_id, 8) || put(out, m->nnodes, 4);
    for (size_t i = 0; rc == 0 && i < m->nnodes; i++) {
        size_t n = strlen(m->nodes[i].addr);
        rc = put(out, m->nodes[i].id, 8) || put(out, n, 4) || buf_append(out, m->nodes[i].addr, n);
    }
    rc = rc || put(out, m->nregions, 4);
    for (size_t i = 0; rc == 0 && i < m->nregions; i++)
        rc = put_region(out, &m->regions[i]);
    pthread_rwlock_unlock(&m->lock);
    return rc ? -1 : 0;
}

int pd_map_restore(pd_map *m, const uint8_t *p, size_t len)
{
    reader rd = {p, len, false};
    uint64_t next_id = get(&rd, 8);
    size_t nn = (size_t)get(&rd, 4);
    if (rd.bad || next_id == 0 || next_id > PD_MAX_ID + 1 || nn > PD_MAX_NODES)
        return -1;
    pd_node *nodes = nn ? calloc(nn, sizeof *nodes) : NULL;
    if (nn && nodes == NULL)
        return -1;
    for (size_t i = 0; i < nn && !rd.bad; i++) {
        nodes[i].id = get(&rd, 8);
        size_t n = (size_t)get(&rd, 4);
        const uint8_t *a = rd.bad || n >= PD_ADDR_MAX ? NULL : get_bytes(&rd, n);
        /* Ids in order, below the counter; addresses well formed. */
        if (a == NULL || !addr_valid(a, n) || nodes[i].id == 0 || nodes[i].id >= next_id ||
            (i > 0 && nodes[i].id <= nodes[i - 1].id)) {
            rd.bad = true;
            break;
        }
        memcpy(nodes[i].addr, a, n);
    }
    size_t nr = rd.bad ? 0 : (size_t)get(&rd, 4);
    if (rd.bad || nr > PD_MAX_REGIONS) {
        free(nodes);
        return -1;
    }
    pd_region *rs = nr ? calloc(nr, sizeof *rs) : NULL;
    bool bad = nr && rs == NULL;
    size_t got = 0;
    while (!bad && got < nr) {
        pd_region r;
        /* Each well formed, in start order, disjoint from the one before. */
        if (!get_region(&rd, &r) || (got > 0 && (key_cmp(rs[got - 1].start, rs[got - 1].start_len,
                                                         r.start, r.start_len) >= 0 ||
                                                 overlap(&rs[got - 1], &r))) ||
            pd_region_copy(&rs[got], &r) != 0)
            bad = true;
        else
            got++;
    }
    size_t cap = index_cap(nr);
    int64_t *ix = !bad && cap ? malloc(cap * sizeof *ix) : NULL;
    if (bad || rd.left != 0 || (cap && ix == NULL) || !index_ids(rs, nr, ix, cap)) {
        free(ix);
        free_regions(rs, got);
        free(nodes);
        return -1;
    }
    pthread_rwlock_wrlock(&m->lock);
    free(m->nodes);
    free_regions(m->regions, m->nregions);
    free(m->by_id);
    m->next_id = next_id;
    m->nodes = nodes;
    m->nnodes = nn;
    m->regions = rs;
    m->nregions = nr;
    m->by_id = ix;
    m->by_id_cap = cap;
    pthread_rwlock_unlock(&m->lock);
    return 0;
}

/* ---- readers ---- */

void pd_map_counts(pd_map *m, pd_counts *out)
{
    pthread_rwlock_rdlock(&m->lock);
    *out = (pd_counts){.next_id = m->next_id, .nodes = m->nnodes, .regions = m->nregions};
    pthread_rwlock_unlock(&m->lock);
}

int pd_map_find(pd_map *m, const uint8_t *key, size_t len, pd_region *out)
{
    pthread_rwlock_rdlock(&m->lock);
    int64_t f = floor_of(m, key, len);
    int rc = 0;
    if (f >= 0 && before_end(key, len, &m->regions[f]))
        rc = pd_region_copy(out, &m->regions[f]) == 0 ? 1 : -1;
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

size_t pd_map_each(pd_map *m, const uint8_t *from, size_t len, size_t limit,
                   void (*fn)(void *arg, const pd_region *r), void *arg)
{
    pthread_rwlock_rdlock(&m->lock);
    int64_t f = floor_of(m, from, len);
    size_t i = f >= 0 && before_end(from, len, &m->regions[f]) ? (size_t)f : (size_t)(f + 1);
    size_t k = 0;
    for (; i < m->nregions && k < limit; i++, k++)
        fn(arg, &m->regions[i]);
    pthread_rwlock_unlock(&m->lock);
    return k;
}

void pd_map_each_node(pd_map *m, void (*fn)(void *arg, const pd_node *n), void *arg)
{
    pthread_rwlock_rdlock(&m->lock);
    for (size_t i = 0; i < m->nnodes; i++)
        fn(arg, &m->nodes[i]);
    pthread_rwlock_unlock(&m->lock);
}

bool pd_map_node(pd_map *m, uint64_t id, char addr[PD_ADDR_MAX])
{
    pthread_rwlock_rdlock(&m->lock);
    size_t lo = 0, hi = m->nnodes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->nodes[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    bool found = lo < m->nnodes && m->nodes[lo].id == id;
    if (found && addr != NULL)
        memcpy(addr, m->nodes[lo].addr, PD_ADDR_MAX);
    pthread_rwlock_unlock(&m->lock);
    return found;
}

bool pd_map_holds(pd_map *m, const pd_region *r)
{
    pthread_rwlock_rdlock(&m->lock);
    int64_t i = find_id(m, r->id);
    bool same = i >= 0 && pd_region_equal(&m->regions[i], r);
    pthread_rwlock_unlock(&m->lock);
    return same;
}
