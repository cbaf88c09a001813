/*
 * latch.c — latches: in-memory locks on keys that keep concurrent
 * proposals apart in propose mode (docs/DESIGN.md §4.10; TiKV's latches,
 * src/storage/txn/latch.rs, are the model).
 *
 * A key is hashed to one of PC_LATCH_SLOTS slots; an action's keys make a
 * set of slots (a bitmap: sorted and deduplicated by construction, and at
 * most PC_LATCH_SLOTS / 8 bytes whatever the number of keys). A set is
 * taken slot by slot in increasing order, so two actions that need
 * overlapping sets never wait on each other in a cycle: no deadlock. Two
 * keys that share a slot only serialize actions that did not need it.
 *
 * Each slot is a ticket lock: an acquirer takes the next ticket and waits
 * until the slot serves it, so waiters on a slot are served first come,
 * first served (TiKV keeps a queue per slot for the same fairness). The
 * slots' counters are guarded by striped mutexes, each with a condition
 * variable its waiters sleep on. A set can be released by any thread:
 * nothing here remembers who took it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define STRIPES 64 /* mutexes over the slots: slot i is under stripe i % STRIPES */
#define WORDS (PC_LATCH_SLOTS / 64)

typedef struct {
    uint32_t next;    /* the next ticket to hand out */
    uint32_t serving; /* the ticket that holds the slot (next == serving: free) */
} slot;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a slot of this stripe was released */
} stripe;

struct pc_latch_table {
    slot slots[PC_LATCH_SLOTS];
    stripe stripes[STRIPES];
};

pc_rc pc_latch_table_new(pc_latch_table **out)
{
    pc_latch_table *t = calloc(1, sizeof(*t));
    *out = NULL;
    if (t == NULL)
        return PC_NOMEM;
    for (size_t i = 0; i < STRIPES; i++) {
        if (pthread_mutex_init(&t->stripes[i].mu, NULL) != 0 ||
            pthread_cond_init(&t->stripes[i].cv, NULL) != 0) {
            /* Those made so far: a failed init leaves nothing to destroy. */
            for (size_t j = 0; j < i; j++) {
                pthread_mutex_destroy(&t->stripes[j].mu);
                pthread_cond_destroy(&t->stripes[j].cv);
            }
            free(t);
            return PC_ERROR;
        }
    }
    *out = t;
    return PC_OK;
}

void pc_latch_table_free(pc_latch_table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < STRIPES; i++) {
        pthread_cond_destroy(&t->stripes[i].cv);
        pthread_mutex_destroy(&t->stripes[i].mu);
    }
    free(t);
}

/* ---- sets of slots ---- */

/* FNV-1a over the key's bytes: cheap, and spreads short similar keys. */
static uint32_t slot_of(const void *key, size_t len)
{
    const uint8_t *p = key;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return (uint32_t)(h ^ (h >> 32)) & (PC_LATCH_SLOTS - 1);
}

void pc_latch_set_clear(pc_latch_set *set)
{
    memset(set, 0, sizeof(*set));
}

void pc_latch_set_add(pc_latch_set *set, const void *key, size_t len)
{
    uint32_t i = slot_of(key, len);
    set->bits[i / 64] |= 1ULL << (i % 64);
}

bool pc_latch_set_empty(const pc_latch_set *set)
{
    for (size_t w = 0; w < WORDS; w++)
        if (set->bits[w] != 0)
            return false;
    return true;
}

bool pc_latch_set_covers(const pc_latch_set *held, const pc_latch_set *want)
{
    for (size_t w = 0; w < WORDS; w++)
        if ((want->bits[w] & ~held->bits[w]) != 0)
            return false;
    return true;
}

/* The first slot of set at or after from; PC_LATCH_SLOTS when none. */
static uint32_t next_slot(const pc_latch_set *set, uint32_t from)
{
    for (uint32_t w = from / 64; w < WORDS; w++) {
        uint64_t bits = set->bits[w];
        if (w == from / 64)
            bits &= ~0ULL << (from % 64);
        if (bits != 0)
            return w * 64 + (uint32_t)__builtin_ctzll(bits);
    }
    return PC_LATCH_SLOTS;
}

#define FOR_EACH_SLOT(set, i) \
    for (uint32_t i = next_slot(set, 0); i < PC_LATCH_SLOTS; i = next_slot(set, i + 1))

/* ---- taking and giving back ---- */

static stripe *stripe_of(pc_latch_table *t, uint32_t i)
{
    return &t->stripes[i % STRIPES];
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t pc_latch_lock(pc_latch_table *t, const pc_latch_set *set)
{
    uint64_t since = 0; /* when the first busy slot was met */
    FOR_EACH_SLOT(set, i) {
        stripe *st = stripe_of(t, i);
        pthread_mutex_lock(&st->mu);
        uint32_t ticket = t->slots[i].next++;
        if (t->slots[i].serving != ticket && since == 0)
            since = mono_ns();
        while (t->slots[i].serving != ticket)
            pthread_cond_wait(&st->cv, &st->mu);
        pthread_mutex_unlock(&st->mu);
    }
    return since == 0 ? 0 : (mono_ns() - since) | 1; /* never 0 once it waited */
}

/* Give back slot i (held by the caller's set). */
static void unlock_slot(pc_latch_table *t, uint32_t i)
{
    stripe *st = stripe_of(t, i);
    pthread_mutex_lock(&st->mu);
    t->slots[i].serving++;
    /* Waiters of every slot of the stripe share the condition variable. */
    bool waiters = t->slots[i].serving != t->slots[i].next;
    pthread_mutex_unlock(&st->mu);
    if (waiters)
        pthread_cond_broadcast(&st->cv);
}

bool pc_latch_trylock(pc_latch_table *t, const pc_latch_set *set)
{
    FOR_EACH_SLOT(set, i) {
        stripe *st = stripe_of(t, i);
        pthread_mutex_lock(&st->mu);
        bool free_now = t->slots[i].next == t->slots[i].serving;
        if (free_now)
            t->slots[i].next++;
        pthread_mutex_unlock(&st->mu);
        if (!free_now) {
            /* Give back the slots below i taken so far. */
            for (uint32_t j = next_slot(set, 0); j < i; j = next_slot(set, j + 1))
                unlock_slot(t, j);
            return false;
        }
    }
    return true;
}

void pc_latch_unlock(pc_latch_table *t, const pc_latch_set *set)
{
    FOR_EACH_SLOT(set, i)
        unlock_slot(t, i);
}

size_t pc_latch_waiting(pc_latch_table *t)
{
    size_t n = 0;
    for (uint32_t i = 0; i < PC_LATCH_SLOTS; i++) {
        stripe *st = stripe_of(t, i);
        pthread_mutex_lock(&st->mu);
        uint32_t queued = t->slots[i].next - t->slots[i].serving; /* holder and waiters */
        pthread_mutex_unlock(&st->mu);
        n += queued > 1 ? queued - 1 : 0;
    }
    return n;
}
