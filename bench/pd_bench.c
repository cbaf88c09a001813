/*
 * pd_bench.c — the placement driver under many simulated service nodes
 * (issue #27, docs/DESIGN.md §6.3): what its leader's CPU, memory and
 * heartbeat latency are with 1,000 nodes reporting 100 regions each.
 *
 *   pd_bench --url URL [--nodes 1000] [--regions 100] [--interval-ms 10000]
 *            [--seconds 60] [--split-rate 2] [--conns 16] [--saturate-seconds 10]
 *            [--pid PID]... [--token T]
 *
 * URL is the oracle group's leader. Phases, each timed:
 *   register   every node registers (POST /v1/pd/nodes);
 *   first      every node's first heartbeat: its regions, new to the map
 *              (one Raft command each; node n leads regions n*R..n*R+R-1 of
 *              a keyspace cut in nodes*regions ranges);
 *   steady     for --seconds, each node every --interval-ms (TiKV's store
 *              heartbeat is 10 s), its start spread over the interval; the
 *              regions unchanged but for --split-rate splits a second
 *              (a region's right part gets an id handed out beforehand; the
 *              node that led it reports both parts);
 *   saturate   every connection sends heartbeats back to back: the most
 *              the driver answers.
 * Each phase prints its rate, p50/p99/p99.9 latency, errors, and for every
 * --pid (the members) the CPU (% of one core) and resident memory.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base64.h"
#include "buf.h"

#define MAX_PIDS 8
#define MAX_SAMPLES 4000000

typedef struct {
    uint64_t id, version;
    char *start, *end;           /* end NULL: the end of the keyspace */
} region;

typedef struct {
    uint64_t id;                 /* the driver's */
    region *rs;
    size_t n, cap;
    char *body;                  /* its heartbeat, made again after a split */
    size_t body_len;
    pthread_mutex_t mu;
} node;

static struct {
    const char *url, *token;
    int nodes, regions, interval_ms, seconds, conns, saturate;
    double split_rate;
    int pids[MAX_PIDS], npids;
    node *n;
    uint64_t next_split_id, last_split_id; /* handed out beforehand */
    _Atomic uint64_t split_ctr;
} B = {.nodes = 1000, .regions = 100, .interval_ms = 10000, .seconds = 60, .conns = 16,
       .saturate = 10, .split_rate = 2};

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void die(const char *what)
{
    fprintf(stderr, "pd_bench: %s\n", what);
    exit(1);
}

/* ---- HTTP ---- */

typedef struct {
    CURL *c;
    struct curl_slist *hdr;
    buf out;
} client;

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
    return buf_append(arg, p, size * n) == 0 ? size * n : 0;
}

static void client_init(client *cl)
{
    memset(cl, 0, sizeof *cl);
    cl->c = curl_easy_init();
    if (cl->c == NULL)
        die("curl_easy_init");
    cl->hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (B.token != NULL) {
        char h[600];
        snprintf(h, sizeof h, "Authorization: Bearer %s", B.token);
        cl->hdr = curl_slist_append(cl->hdr, h);
    }
    curl_easy_setopt(cl->c, CURLOPT_HTTPHEADER, cl->hdr);
    curl_easy_setopt(cl->c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(cl->c, CURLOPT_WRITEDATA, &cl->out);
    curl_easy_setopt(cl->c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(cl->c, CURLOPT_NOSIGNAL, 1L);
}

static void client_free(client *cl)
{
    curl_slist_free_all(cl->hdr);
    curl_easy_cleanup(cl->c);
    buf_free(&cl->out);
}

/* POST path with body (may be NULL): the status, the answer in cl->out. */
static long post(client *cl, const char *path, const char *body, size_t len)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", B.url, path);
    buf_reset(&cl->out);
    curl_easy_setopt(cl->c, CURLOPT_URL, url);
    curl_easy_setopt(cl->c, CURLOPT_POST, 1L);
    curl_easy_setopt(cl->c, CURLOPT_POSTFIELDS, body != NULL ? body : "");
    curl_easy_setopt(cl->c, CURLOPT_POSTFIELDSIZE, (long)(body != NULL ? len : 0));
    long st = 0;
    if (curl_easy_perform(cl->c) == CURLE_OK)
        curl_easy_getinfo(cl->c, CURLINFO_RESPONSE_CODE, &st);
    return st;
}

/* The integer after "name": in cl->out (0 if absent). */
static uint64_t field(client *cl, const char *name)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", name);
    const char *p = cl->out.data != NULL ? strstr(cl->out.data, pat) : NULL;
    return p != NULL ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

/* ---- the simulated nodes ---- */

static char *key_for(uint64_t i)
{
    char k[32];
    snprintf(k, sizeof k, "r%09llu", (unsigned long long)i);
    return strdup(k);
}

static void put_key(buf *b, const char *k)
{
    size_t n = strlen(k);
    char *s = malloc(4 * ((n + 2) / 3) + 1);
    b64_encode(k, n, s);
    buf_printf(b, "\"%s\"", s);
    free(s);
}

/* A node's heartbeat body, from its regions (node's mutex held). */
static void make_body(node *nd)
{
    buf b = BUF_INIT;
    buf_printf(&b, "{\"node\":%llu,\"regions\":[", (unsigned long long)nd->id);
    for (size_t i = 0; i < nd->n; i++) {
        const region *r = &nd->rs[i];
        buf_printf(&b, "%s{\"id\":%llu,\"version\":%llu,\"conf_ver\":1,\"start\":", i ? "," : "",
                   (unsigned long long)r->id, (unsigned long long)r->version);
        put_key(&b, r->start);
        buf_puts(&b, ",\"end\":");
        if (r->end != NULL)
            put_key(&b, r->end);
        else
            buf_puts(&b, "null");
        buf_printf(&b, ",\"replicas\":[%llu],\"bytes\":%d,\"keys\":%d}",
                   (unsigned long long)nd->id, 64 << 20, 100000);
    }
    buf_puts(&b, "]}");
    free(nd->body);
    nd->body = buf_take(&b, &nd->body_len);
}

static void add_region(node *nd, region r)
{
    if (nd->n == nd->cap) {
        nd->cap = nd->cap ? 2 * nd->cap : 8;
        nd->rs = realloc(nd->rs, nd->cap * sizeof *nd->rs);
        if (nd->rs == NULL)
            die("out of memory");
    }
    nd->rs[nd->n++] = r;
}

/* Split one of nd's regions: the right part gets the next id handed out
 * beforehand; both parts one version up. false when none is left. */
static bool split_one(node *nd)
{
    uint64_t id = atomic_fetch_add(&B.split_ctr, 1) + B.next_split_id;
    if (id > B.last_split_id)
        return false;
    pthread_mutex_lock(&nd->mu);
    region *r = &nd->rs[(size_t)rand() % nd->n];
    /* start + "-" + a counter sorts after start and before any end
     * made the same way from a later start; tried on a region whose
     * end is not its own start's extension. */
    char k[256];
    snprintf(k, sizeof k, "%.200s-%06llu", r->start, (unsigned long long)id % 1000000);
    bool ok = r->end == NULL || strcmp(k, r->end) < 0;
    if (ok) {
        region right = {.id = id, .version = r->version + 1, .start = strdup(k),
                        .end = r->end != NULL ? strdup(r->end) : NULL};
        free(r->end);
        r->end = strdup(k);
        r->version++;
        add_region(nd, right);
        make_body(nd);
    }
    pthread_mutex_unlock(&nd->mu);
    return ok;
}

/* ---- latency ---- */

typedef struct {
    double *ms;
    size_t n;
    uint64_t errors;
} samples;

static void record(samples *s, double ms)
{
    if (s->n < MAX_SAMPLES / 16)
        s->ms[s->n++] = ms;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- the members' CPU and memory ---- */

typedef struct {
    uint64_t ticks[MAX_PIDS];
    uint64_t at_us;
} cpu_mark;

static uint64_t proc_ticks(int pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    const char *p = strrchr(line, ')');
    unsigned long long ut = 0, st = 0;
    /* after ") ": state, then fields 4..13, utime (14), stime (15) */
    if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                            &st) != 2)
        return 0;
    return ut + st;
}

static long rss_kb(int pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long kb = 0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    if (f != NULL)
        fclose(f);
    return kb;
}

static void mark_cpu(cpu_mark *m)
{
    for (int i = 0; i < B.npids; i++)
        m->ticks[i] = proc_ticks(B.pids[i]);
    m->at_us = now_us();
}

static void report(const char *phase, samples *all, int nthreads, const cpu_mark *from,
                   uint64_t count)
{
    cpu_mark to;
    mark_cpu(&to);
    size_t n = 0;
    uint64_t errors = 0;
    for (int t = 0; t < nthreads; t++)
        n += all[t].n, errors += all[t].errors;
    double *ms = malloc((n + 1) * sizeof *ms);
    size_t k = 0;
    for (int t = 0; t < nthreads; t++) {
        memcpy(ms + k, all[t].ms, all[t].n * sizeof *ms);
        k += all[t].n;
    }
    qsort(ms, n, sizeof *ms, cmp_d);
    double secs = (double)(to.at_us - from->at_us) / 1e6;
#define PCT(p) (n ? ms[(size_t)((double)(n - 1) * (p))] : 0.0)
    printf("%-9s %9llu req %8.1f s %9.0f req/s  p50 %7.2f  p99 %7.2f  p99.9 %7.2f ms  errors %llu\n",
           phase, (unsigned long long)count, secs, (double)count / secs, PCT(0.5), PCT(0.99),
           PCT(0.999), (unsigned long long)errors);
    long hz = sysconf(_SC_CLK_TCK);
    for (int i = 0; i < B.npids; i++)
        printf("          member pid %d: CPU %5.1f%% of a core, RSS %ld MB\n", B.pids[i],
               100.0 * (double)(to.ticks[i] - from->ticks[i]) / (double)hz / secs,
               rss_kb(B.pids[i]) / 1024);
    free(ms);
}

/* ---- phases ---- */

typedef enum { REGISTER, FIRST, STEADY, SATURATE } phase;

typedef struct {
    int t;
    phase ph;
    samples s;
    uint64_t done;
    uint64_t until_us, start_us;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    client cl;
    client_init(&cl);
    unsigned seed = (unsigned)w->t * 7919u + 1u;
    uint64_t split_every_us = B.split_rate > 0 ? (uint64_t)(1e6 * B.conns / B.split_rate) : 0;
    uint64_t next_split = w->start_us + (split_every_us ? (uint64_t)rand_r(&seed) % split_every_us : 0);
    for (int i = w->t;; i += B.conns) {
        if (w->ph == REGISTER || w->ph == FIRST) {
            if (i >= B.nodes)
                break;
        } else if (now_us() >= w->until_us) {
            break;
        }
        node *nd = &B.n[i % B.nodes];
        if (w->ph == STEADY) { /* node i's turn: spread over the interval */
            uint64_t round = (uint64_t)(i / B.nodes), slot = (uint64_t)(i % B.nodes);
            uint64_t due = w->start_us + round * (uint64_t)B.interval_ms * 1000u +
                           slot * (uint64_t)B.interval_ms * 1000u / (uint64_t)B.nodes;
            while (now_us() < due && now_us() < w->until_us)
                usleep(1000);
            if (now_us() >= w->until_us)
                break;
            if (split_every_us && now_us() >= next_split) {
                split_one(nd);
                next_split += split_every_us;
            }
        }
        uint64_t t0 = now_us();
        long st;
        if (w->ph == REGISTER) {
            char body[128];
            int len = snprintf(body, sizeof body, "{\"address\":\"http://10.%d.%d.%d:8080\"}",
                               (i >> 16) & 255, (i >> 8) & 255, i & 255);
            st = post(&cl, "/v1/pd/nodes", body, (size_t)len);
            nd->id = field(&cl, "id");
        } else {
            pthread_mutex_lock(&nd->mu);
            char *body = strdup(nd->body);
            size_t len = nd->body_len;
            pthread_mutex_unlock(&nd->mu);
            st = post(&cl, "/v1/pd/heartbeat", body, len);
            free(body);
        }
        record(&w->s, (double)(now_us() - t0) / 1000.0);
        if (st != 200) {
            if (w->s.errors++ < 3)
                fprintf(stderr, "pd_bench: %ld %.200s\n", st, cl.out.data ? cl.out.data : "");
        }
        w->done++;
    }
    client_free(&cl);
    return NULL;
}

static void run_phase(const char *name, phase ph, int seconds)
{
    size_t nc = B.conns > 0 ? (size_t)B.conns : 1;
    worker *ws = calloc(nc, sizeof *ws);
    pthread_t *th = calloc(nc, sizeof *th);
    cpu_mark from;
    mark_cpu(&from);
    uint64_t start = now_us();
    for (int t = 0; t < B.conns; t++) {
        ws[t] = (worker){.t = t, .ph = ph, .start_us = start,
                         .until_us = start + (uint64_t)seconds * 1000000u};
        ws[t].s.ms = malloc(MAX_SAMPLES / 16 * sizeof(double));
        if (ws[t].s.ms == NULL || pthread_create(&th[t], NULL, work, &ws[t]) != 0)
            die("cannot start a worker");
    }
    uint64_t count = 0;
    samples *all = calloc(nc, sizeof *all);
    for (int t = 0; t < B.conns; t++) {
        pthread_join(th[t], NULL);
        count += ws[t].done;
        all[t] = ws[t].s;
    }
    report(name, all, B.conns, &from, count);
    for (int t = 0; t < B.conns; t++)
        free(ws[t].s.ms);
    free(all);
    free(ws);
    free(th);
}

/* Ids for the regions and the splits, from the driver (at most 100,000 a call). */
static uint64_t take_ids(client *cl, uint64_t count)
{
    uint64_t first = 0;
    while (count > 0) {
        uint64_t n = count > 100000 ? 100000 : count;
        char path[64];
        snprintf(path, sizeof path, "/v1/pd/ids?count=%llu", (unsigned long long)n);
        if (post(cl, path, NULL, 0) != 200)
            die("POST /v1/pd/ids failed");
        uint64_t f = field(cl, "first");
        first = first ? first : f;
        count -= n;
    }
    return first;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            die("every flag takes a value (see the top of bench/pd_bench.c)");
        i++;
        if (strcmp(a, "--url") == 0)
            B.url = v;
        else if (strcmp(a, "--token") == 0)
            B.token = v;
        else if (strcmp(a, "--nodes") == 0)
            B.nodes = atoi(v);
        else if (strcmp(a, "--regions") == 0)
            B.regions = atoi(v);
        else if (strcmp(a, "--interval-ms") == 0)
            B.interval_ms = atoi(v);
        else if (strcmp(a, "--seconds") == 0)
            B.seconds = atoi(v);
        else if (strcmp(a, "--split-rate") == 0)
            B.split_rate = atof(v);
        else if (strcmp(a, "--conns") == 0)
            B.conns = atoi(v);
        else if (strcmp(a, "--saturate-seconds") == 0)
            B.saturate = atoi(v);
        else if (strcmp(a, "--pid") == 0 && B.npids < MAX_PIDS)
            B.pids[B.npids++] = atoi(v);
        else
            die("unknown flag (see the top of bench/pd_bench.c)");
    }
    if (B.url == NULL || B.nodes < 1 || B.regions < 1 || B.conns < 1 || B.interval_ms < 1 ||
        (uint64_t)B.nodes * (uint64_t)B.regions > 1000000)
        die("--url is required; nodes, regions, conns, interval positive; nodes*regions <= 1e6");
    setvbuf(stdout, NULL, _IOLBF, 0); /* each phase's lines as they come */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    B.n = calloc((size_t)B.nodes, sizeof *B.n);
    printf("pd_bench: %d nodes x %d regions (%d regions), heartbeat every %d ms, %.1f splits/s, "
           "%d connections\n",
           B.nodes, B.regions, B.nodes * B.regions, B.interval_ms, B.split_rate, B.conns);
    run_phase("register", REGISTER, 0);
    client cl;
    client_init(&cl);
    uint64_t total = (uint64_t)B.nodes * (uint64_t)B.regions;
    uint64_t splits = (uint64_t)(B.split_rate * (B.seconds + B.saturate)) + 1;
    uint64_t first = take_ids(&cl, total);
    B.next_split_id = take_ids(&cl, splits);
    B.last_split_id = B.next_split_id + splits - 1;
    client_free(&cl);
    for (int i = 0; i < B.nodes; i++) {
        node *nd = &B.n[i];
        if (nd->id == 0)
            die("a node did not register");
        pthread_mutex_init(&nd->mu, NULL);
        for (int k = 0; k < B.regions; k++) {
            uint64_t g = (uint64_t)i * (uint64_t)B.regions + (uint64_t)k;
            region r = {.id = first + g, .version = 1, .start = g == 0 ? strdup("") : key_for(g),
                        .end = g + 1 < total ? key_for(g + 1) : NULL};
            add_region(nd, r);
        }
        make_body(nd);
    }
    run_phase("first", FIRST, 0);
    run_phase("steady", STEADY, B.seconds);
    if (B.saturate > 0)
        run_phase("saturate", SATURATE, B.saturate);
    printf("splits made: %llu\n", (unsigned long long)atomic_load(&B.split_ctr));
    for (int i = 0; i < B.nodes; i++) {
        for (size_t k = 0; k < B.n[i].n; k++) {
            free(B.n[i].rs[k].start);
            free(B.n[i].rs[k].end);
        }
        free(B.n[i].rs);
        free(B.n[i].body);
        pthread_mutex_destroy(&B.n[i].mu);
    }
    free(B.n);
    curl_global_cleanup();
    return 0;
}
