/*
 * pd_map.c — see pd_map.h. The regions are an array of pointers sorted by
 * start key (lookups by binary search), each region its own allocation,
 * with a hash index by id beside it. A command that changes the map
 * builds the next array of pointers in one merge (O(regions) pointer
 * copies: 800 KB for 100,000 regions, cheap next to the Raft round that
 * carried it) and updates the index for the ids it removed and added; a
 * report that changes nothing is not proposed (pd_map_classify). Big-endian
 * integers, as every other command and image of the project.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pd_map.h"

struct pd_map {
    pthread_rwlock_t lock;
    uint64_t next_id;          /* the next id to hand out (ids start at 1) */
    pd_node *nodes;            /* sorted by id (handed out in order) */
    size_t nnodes;
    pd_region **regions;       /* sorted by start, disjoint; each owned */
    size_t nregions;
    pd_region **by_id;         /* open addressing, linear probing; NULL: empty */
    size_t by_id_cap;          /* a power of two, at least twice nregions (0: none yet) */
    uint64_t bound_bytes;      /* every region's start_len + end_len */
    uint64_t max_bound_bytes;  /* PD_MAX_MAP_BYTES but in tests */
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

/* A command every member applies must change every member alike: one
 * that cannot allocate stops the process (the supervisor restarts it, and
 * it applies the command again from its log) rather than refuse what the
 * others took (docs/DESIGN.md §4.7, fail fast). */
static _Noreturn void out_of_memory(const char *what)
{
    log_error("placement driver: out of memory applying %s: stopping rather than differ "
              "from the other members",
              what);
    abort();
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
    return pd_map_new_limited(PD_MAX_MAP_BYTES);
}

pd_map *pd_map_new_limited(uint64_t max_bound_bytes)
{
    pd_map *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    /* Writers first: the writer is the Raft loop applying a command, and
     * readers (HTTP threads listing the map) must not hold it off. Nothing
     * takes the read lock twice on one thread (that could then wait on a
     * queued writer). */
    pthread_rwlockattr_t attr;
    if (pthread_rwlockattr_init(&attr) != 0)
        goto fail;
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = pthread_rwlock_init(&m->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (rc != 0)
        goto fail;
    m->next_id = 1;
    m->max_bound_bytes = max_bound_bytes;
    return m;
fail:
    free(m);
    return NULL;
}

static uint64_t bound_bytes(const pd_region *r)
{
    return (uint64_t)r->start_len + r->end_len;
}

static void free_region(pd_region *r)
{
    if (r != NULL)
        pd_region_clear(r);
    free(r);
}

/* A region of its own allocation, a copy of src; NULL when out of memory. */
static pd_region *new_region(const pd_region *src)
{
    pd_region *r = malloc(sizeof *r);
    if (r != NULL && pd_region_copy(r, src) != 0) {
        free(r);
        r = NULL;
    }
    return r;
}

static void free_regions(pd_region **rs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free_region(rs[i]);
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

/* The size of an index by id for n regions. */
static size_t index_cap(size_t n)
{
    size_t c = 16;
    while (c < 2 * n)
        c *= 2;
    return c;
}

/* Put r in the index ix of cap slots; false when its id is there already. */
static bool index_put(pd_region **ix, size_t cap, pd_region *r)
{
    size_t s = slot_of(r->id, cap);
    for (; ix[s] != NULL; s = (s + 1) & (cap - 1))
        if (ix[s]->id == r->id)
            return false;
    ix[s] = r;
    return true;
}

/* The slot of id in m's index, or of the empty slot that ends its probe. */
static size_t index_slot(const pd_map *m, uint64_t id)
{
    size_t s = slot_of(id, m->by_id_cap);
    while (m->by_id[s] != NULL && m->by_id[s]->id != id)
        s = (s + 1) & (m->by_id_cap - 1);
    return s;
}

/* Take id out of m's index, moving later entries of its probe back so no
 * lookup stops short (linear probing's deletion, Knuth 6.4 algorithm R). */
static void index_drop(pd_map *m, uint64_t id)
{
    size_t mask = m->by_id_cap - 1, i = index_slot(m, id);
    if (m->by_id[i] == NULL)
        return;
    for (size_t j = (i + 1) & mask; m->by_id[j] != NULL; j = (j + 1) & mask) {
        size_t home = slot_of(m->by_id[j]->id, m->by_id_cap);
        /* j's entry may fill i only if its home is not in (i, j]. */
        bool between = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!between) {
            m->by_id[i] = m->by_id[j];
            i = j;
        }
    }
    m->by_id[i] = NULL;
}

/* m's region with this id, NULL if none. */
static pd_region *find_id(const pd_map *m, uint64_t id)
{
    return m->by_id_cap ? m->by_id[index_slot(m, id)] : NULL;
}

/* The index of the last region starting at or before key, -1 if none. */
static int64_t floor_of(const pd_map *m, const uint8_t *key, size_t len)
{
    size_t lo = 0, hi = m->nregions; /* the answer is lo - 1 */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const pd_region *r = m->regions[mid];
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
    if (f >= 0 && overlap(m->regions[f], r))
        return (size_t)f;
    return (size_t)(f + 1);
}

/* ---- commands ---- */

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

int pd_cmd_node(buf *out, const char *addr, char *err, size_t errlen)
{
    size_t n = strlen(addr);
    if (!addr_valid((const uint8_t *)addr, n)) { /* refused here, before a round */
        snprintf(err, errlen, "an address has 1 to %d bytes of printable ASCII, no spaces",
                 PD_ADDR_MAX - 1);
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
        if (grown == NULL)
            out_of_memory("a node's registration");
        m->nodes = grown;
        id = take_ids(m, 1);
        if (id != 0) {
            pd_node *nd = &m->nodes[m->nnodes++];
            memset(nd, 0, sizeof *nd);
            nd->id = id;
            memcpy(nd->addr, a, n);
            nd->addr[n] = '\0';
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

/* Indexes into the map's regions: those a command drops. */
typedef struct {
    size_t *at;
    size_t n, cap;
    bool failed;               /* out of memory */
} index_list;

static void list_add(index_list *l, size_t i)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        size_t *at = realloc(l->at, cap * sizeof *at);
        if (at == NULL) {
            l->failed = true;
            return;
        }
        l->at = at;
        l->cap = cap;
    }
    l->at[l->n++] = i;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Sort l and drop repeats. */
static void list_unique(index_list *l)
{
    if (l->n == 0)
        return;
    qsort(l->at, l->n, sizeof *l->at, cmp_size);
    size_t k = 1;
    for (size_t i = 1; i < l->n; i++)
        if (l->at[i] != l->at[k - 1])
            l->at[k++] = l->at[i];
    l->n = k;
}

/* Whether the map takes report c (PD's rule), adding to gone the stored
 * regions it replaces: the region of its id and every region it overlaps,
 * all of an older epoch. Same epoch and same region: nothing to take. */
static bool takes(const pd_map *m, const pd_region *c, index_list *gone)
{
    const pd_region *same = find_id(m, c->id);
    if (same != NULL && epoch_cmp(c, same) <= 0)
        return false; /* older, or the same epoch: unchanged (or a conflict, kept) */
    size_t first = first_overlap(m, c);
    for (size_t i = first; i < m->nregions; i++) {
        const pd_region *o = m->regions[i];
        if (!before_end(o->start, o->start_len, c))
            break;
        if (o->id != c->id && o->version >= c->version)
            return false; /* a region at least as new holds part of c's range */
    }
    if (same != NULL) /* starts are unique: its own start finds it */
        list_add(gone, (size_t)floor_of(m, same->start, same->start_len));
    for (size_t i = first; i < m->nregions; i++) {
        if (!before_end(m->regions[i]->start, m->regions[i]->start_len, c))
            break;
        list_add(gone, i);
    }
    return true;
}

/* The map after a command: the stored regions not gone (gone sorted,
 * unique) and the taken reports (copied), merged in start order; the index
 * loses the gone ids and gains the new. Everything that can fail is
 * allocated first. 0 or -1 (out of memory; the map unchanged). */
static int rebuild(pd_map *m, const index_list *gone, const report *taken, size_t k)
{
    size_t n = m->nregions - gone->n + k, cap = index_cap(n);
    bool grow = cap > m->by_id_cap;
    pd_region **next = malloc((n ? n : 1) * sizeof *next);
    pd_region **made = calloc(k, sizeof *made);
    pd_region **ix = grow ? calloc(cap, sizeof *ix) : NULL;
    size_t c = 0;
    while (made != NULL && c < k && (made[c] = new_region(&taken[c].r)) != NULL)
        c++;
    if (next == NULL || made == NULL || (grow && ix == NULL) || c < k) {
        for (size_t x = 0; made != NULL && x < c; x++)
            free_region(made[x]);
        free(made);
        free(next);
        free(ix);
        return -1;
    }
    if (!grow)
        for (size_t g = 0; g < gone->n; g++)
            index_drop(m, m->regions[gone->at[g]]->id);
    size_t o = 0, i = 0, j = 0, g = 0;
    while (i < m->nregions || j < k) {
        if (g < gone->n && i == gone->at[g]) {
            free_region(m->regions[i++]);
            g++;
            continue;
        }
        bool stored = j == k || (i < m->nregions &&
                                 key_cmp(m->regions[i]->start, m->regions[i]->start_len,
                                         made[j]->start, made[j]->start_len) < 0);
        next[o++] = stored ? m->regions[i++] : made[j++];
    }
    if (grow) { /* a bigger index: every region again */
        for (size_t x = 0; x < n; x++)
            index_put(ix, cap, next[x]);
        free(m->by_id);
        m->by_id = ix;
        m->by_id_cap = cap;
    } else {
        for (size_t x = 0; x < k; x++)
            index_put(m->by_id, m->by_id_cap, made[x]);
    }
    free(made);
    free(m->regions);
    m->regions = next;
    m->nregions = n;
    return 0;
}

/* Drop the reports that repeat an id or overlap another (a report of one
 * leader never does; a forged one may): of an id, the first in the command
 * stays; of overlapping ones, the lowest start (the first in the command
 * on equal starts). The same on every member: both sorts break ties by
 * position. Returns how many are left, in start order. */
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

/* A regions command decoded, its clashes dropped (drop_clashes): the
 * reports in start order, how many in *k; NULL (and *k 0) when it does not
 * decode or breaks a limit, or out of memory (*nomem: the apply stops the
 * process then, as every member must apply alike). */
static report *decode_regions(const uint8_t *p, size_t len, size_t *k, bool *nomem)
{
    reader rd = {p, len, false};
    size_t n = (size_t)get(&rd, 4);
    *k = 0;
    *nomem = false;
    if (rd.bad || n == 0 || n > PD_MAX_REPORT)
        return NULL;
    report *rs = calloc(n, sizeof *rs);
    if (rs == NULL) {
        *nomem = true;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        rs[i].at = i;
        if (!get_region(&rd, &rs[i].r)) {
            free(rs);
            return NULL;
        }
    }
    if (rd.left != 0) {
        free(rs);
        return NULL;
    }
    *k = drop_clashes(rs, n);
    return rs;
}

/* Which of rs[0..k) the map takes (PD's rule, takes), moved to the front
 * in start order, and the stored regions they replace into gone; the map's
 * bound bytes after into *bytes. 0 when none, or when the map would pass
 * a limit: the whole command is refused, alike everywhere. Under m's lock
 * (read or write). */
static size_t decide(const pd_map *m, report *rs, size_t k, index_list *gone, uint64_t *bytes)
{
    size_t taken = 0;
    for (size_t i = 0; i < k; i++)
        if (takes(m, &rs[i].r, gone))
            rs[taken++] = rs[i]; /* start order kept */
    list_unique(gone);
    if (gone->failed)
        return SIZE_MAX;
    *bytes = m->bound_bytes;
    for (size_t i = 0; i < gone->n; i++)
        *bytes -= bound_bytes(m->regions[gone->at[i]]);
    for (size_t i = 0; i < taken; i++)
        *bytes += bound_bytes(&rs[i].r);
    if (taken > 0 &&
        (m->nregions - gone->n + taken > PD_MAX_REGIONS || *bytes > m->max_bound_bytes))
        return 0;
    return taken;
}

uint64_t pd_apply_regions(pd_map *m, const uint8_t *p, size_t len)
{
    size_t k;
    bool nomem;
    report *rs = decode_regions(p, len, &k, &nomem);
    if (nomem)
        out_of_memory("a region report");
    if (rs == NULL)
        return 0;
    index_list gone = {0};
    uint64_t bytes = 0;
    pthread_rwlock_wrlock(&m->lock);
    size_t taken = decide(m, rs, k, &gone, &bytes);
    if (taken == SIZE_MAX)
        out_of_memory("a region report");
    if (taken > 0 && rebuild(m, &gone, rs, taken) != 0)
        out_of_memory("a region report");
    if (taken > 0)
        m->bound_bytes = bytes;
    /* The counter passes every id the map took: an id a node made itself
     * (before it had a driver) is never handed out again. */
    for (size_t i = 0; i < taken; i++)
        if (rs[i].r.id >= m->next_id)
            m->next_id = rs[i].r.id + 1; /* ids are at most PD_MAX_ID */
    pthread_rwlock_unlock(&m->lock);
    free(gone.at);
    free(rs);
    return taken;
}

bool pd_map_would_take(pd_map *m, const uint8_t *p, size_t len)
{
    size_t k;
    bool nomem;
    report *rs = decode_regions(p, len, &k, &nomem);
    if (rs == NULL)
        return nomem; /* out of memory here: propose, and let the apply say */
    index_list gone = {0};
    uint64_t bytes = 0;
    pthread_rwlock_rdlock(&m->lock);
    size_t taken = decide(m, rs, k, &gone, &bytes);
    pthread_rwlock_unlock(&m->lock);
    free(gone.at);
    free(rs);
    return taken > 0; /* SIZE_MAX (out of memory here): let the apply say */
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
        rc = put_region(out, m->regions[i]);
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
    pd_region **rs = calloc(nr ? nr : 1, sizeof *rs);
    bool bad = rs == NULL;
    size_t got = 0;
    uint64_t bytes = 0;
    while (!bad && got < nr) {
        pd_region r;
        /* Each well formed, in start order, disjoint from the one before. */
        const pd_region *prev = got > 0 ? rs[got - 1] : NULL;
        if (!get_region(&rd, &r) ||
            (prev != NULL && (key_cmp(prev->start, prev->start_len, r.start, r.start_len) >= 0 ||
                              overlap(prev, &r))) ||
            (bytes += bound_bytes(&r)) > m->max_bound_bytes ||
            (rs[got] = new_region(&r)) == NULL)
            bad = true;
        else
            got++;
    }
    size_t cap = index_cap(nr);
    pd_region **ix = bad ? NULL : calloc(cap, sizeof *ix);
    bool unique = ix != NULL;
    for (size_t i = 0; unique && i < nr; i++)
        unique = index_put(ix, cap, rs[i]);
    if (bad || rd.left != 0 || !unique) { /* an id twice, or out of memory */
        free(ix);
        if (rs != NULL)
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
    m->bound_bytes = bytes;
    pthread_rwlock_unlock(&m->lock);
    return 0;
}

/* ---- readers ---- */

void pd_map_counts(pd_map *m, pd_counts *out)
{
    pthread_rwlock_rdlock(&m->lock);
    *out = (pd_counts){.next_id = m->next_id,
                       .nodes = m->nnodes,
                       .regions = m->nregions,
                       .bound_bytes = m->bound_bytes};
    pthread_rwlock_unlock(&m->lock);
}

int pd_map_find(pd_map *m, const uint8_t *key, size_t len, pd_region *out)
{
    pthread_rwlock_rdlock(&m->lock);
    int64_t f = floor_of(m, key, len);
    int rc = 0;
    if (f >= 0 && before_end(key, len, m->regions[f]))
        rc = pd_region_copy(out, m->regions[f]) == 0 ? 1 : -1;
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

size_t pd_map_each(pd_map *m, const uint8_t *from, size_t len, size_t limit,
                   void (*fn)(void *arg, const pd_region *r), void *arg)
{
    pthread_rwlock_rdlock(&m->lock);
    int64_t f = floor_of(m, from, len);
    size_t i = f >= 0 && before_end(from, len, m->regions[f]) ? (size_t)f : (size_t)(f + 1);
    size_t k = 0;
    for (; i < m->nregions && k < limit; i++, k++)
        fn(arg, m->regions[i]);
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

/* What a report of r would do to the map (pd_map.h): under m's lock. */
static pd_verdict verdict_of(const pd_map *m, const pd_region *r)
{
    const pd_region *have = find_id(m, r->id);
    if (have != NULL && pd_region_equal(have, r))
        return PD_HELD;
    return have != NULL && epoch_cmp(r, have) <= 0 ? PD_OUTDATED : PD_CHANGED;
}

size_t pd_map_classify(pd_map *m, const pd_region *rs, size_t n, pd_verdict *out)
{
    size_t held = 0;
    pthread_rwlock_rdlock(&m->lock);
    for (size_t i = 0; i < n; i++) {
        out[i] = verdict_of(m, &rs[i]);
        held += out[i] == PD_HELD;
    }
    pthread_rwlock_unlock(&m->lock);
    return held;
}

bool pd_map_holds(pd_map *m, const pd_region *r)
{
    pd_verdict v;
    return pd_map_classify(m, r, 1, &v) == 1;
}
