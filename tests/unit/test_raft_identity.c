/*
 * test_raft_identity.c — common/raft_identity: a member's identity file,
 * the group's id, and the rule a member with an empty data dir follows
 * (docs/DESIGN.md §7.3): bootstrap only when enough others answered to
 * meet every majority without this member and none of them holds any of
 * the group; join as a new incarnation when one does; wait otherwise.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "raft_identity.h"

#define OWN 0x1111
#define THEIRS 0x2222

/* Answers of members that bootstrap (--raft-initial-members: all of
 * them unless a test says otherwise). */
static raft_member_probe silent(void)
{
    return (raft_member_probe){.initial = true};
}

static raft_member_probe fresh(void)
{
    return (raft_member_probe){.initial = true, .answered = true};
}

static raft_member_probe running(uint64_t cluster, uint64_t last_index)
{
    return (raft_member_probe){.initial = true, .answered = true, .cluster = cluster,
                               .raft_id = 2, .has_state = true, .last_index = last_index};
}

static raft_member_decision decide(const raft_member_probe *a, size_t n, uint64_t *cluster)
{
    *cluster = 0;
    return raft_member_decide(a, n, true, OWN, cluster);
}

/* The first start of a group: every other member answers empty, or has
 * only the bootstrap entry of this same group, and enough of them answer
 * to meet every majority without this member (all others of three, four
 * of five in all). */
static void a_new_group_bootstraps_when_the_others_answer(void **state)
{
    (void)state;
    uint64_t c;
    raft_member_probe a[2] = {fresh(), fresh()};
    assert_int_equal(decide(a, 2, &c), RAFT_MEMBER_BOOTSTRAP); /* 3 of 3 */
    assert_int_equal(c, OWN);
    a[1] = running(OWN, 1);
    assert_int_equal(decide(a, 2, &c), RAFT_MEMBER_BOOTSTRAP);
    raft_member_probe five[4] = {fresh(), fresh(), silent(), silent()};
    assert_int_equal(decide(five, 4, &c), RAFT_MEMBER_WAIT); /* 3 of 5: a majority, not enough */
    five[2] = running(OWN, 1);
    assert_int_equal(decide(five, 4, &c), RAFT_MEMBER_BOOTSTRAP); /* 4 of 5 */
    raft_member_probe two[1] = {fresh()};
    assert_int_equal(decide(two, 1, &c), RAFT_MEMBER_BOOTSTRAP); /* 2 of 2 */
}

/* What CI once saw: follower F was cut off before it heard anything of
 * the group past its bootstrap entry, the leader L and W went on, W lost
 * its data dir and L died. W, back, hears only F: bootstrapped, last
 * index 1, term 1. With itself that made a majority "with nothing", so W
 * bootstrapped again as the incarnation that had voted, and with F
 * elected F, which missed every acknowledged write. W must wait: L, who
 * does not answer, may hold them with W's old self. */
static void a_majority_counting_itself_is_not_enough(void **state)
{
    (void)state;
    uint64_t c;
    raft_member_probe a[2] = {running(OWN, 1), silent()};
    assert_int_equal(decide(a, 2, &c), RAFT_MEMBER_WAIT);
    a[0] = fresh();
    assert_int_equal(decide(a, 2, &c), RAFT_MEMBER_WAIT);
    a[1] = running(OWN, 7); /* L back: the group exists */
    assert_int_equal(decide(a, 2, &c), RAFT_MEMBER_JOIN);
}

/* Nobody answers: a member alone never starts a group (it could be the
 * only one of three that lost its disk while the others are down). */
static void alone_it_waits(void **state)
{
    (void)state;
    uint64_t c;
    raft_member_probe a[2] = {silent(), silent()};
    assert_int_equal(decide(a, 2, &c), RAFT_MEMBER_WAIT);
    assert_int_equal(decide(a, 0, &c), RAFT_MEMBER_BOOTSTRAP); /* a group of one */
}

/* One member that holds entries past the bootstrap one (or whose last
 * index is not known yet), or one that is itself joining: the group
 * exists, whatever the others say. */
static void any_member_with_the_group_means_join(void **state)
{
    (void)state;
    uint64_t c;
    raft_member_probe a[2] = {running(THEIRS, 20), silent()};
    assert_int_equal(decide(a, 2, &c), RAFT_MEMBER_JOIN);
    assert_int_equal(c, THEIRS);
    a[0] = running(THEIRS, UINT64_MAX);
    assert_int_equal(decide(a, 2, &c), RAFT_MEMBER_JOIN);
    a[0] = (raft_member_probe){.answered = true, .cluster = THEIRS}; /* joining */
    a[1] = fresh();
    assert_int_equal(decide(a, 2, &c), RAFT_MEMBER_JOIN);
    assert_int_equal(c, THEIRS);
}

/* --raft-initial-members 1,2,3 of five: only they count toward the
 * bootstrap majority, and a member that is not one of them only joins. */
static void members_that_join_later_never_bootstrap(void **state)
{
    (void)state;
    uint64_t c;
    raft_member_probe a[4] = {fresh(), fresh(), fresh(), fresh()};
    a[2].initial = a[3].initial = false; /* members 4 and 5 */
    assert_int_equal(decide(a, 4, &c), RAFT_MEMBER_BOOTSTRAP); /* the 3 */
    a[0] = silent();
    assert_int_equal(decide(a, 4, &c), RAFT_MEMBER_WAIT); /* 2 of 3, however many others */
    raft_member_probe b[4] = {fresh(), fresh(), fresh(), fresh()};
    assert_int_equal(raft_member_decide(b, 4, false, OWN, &c), RAFT_MEMBER_WAIT);
    b[0] = running(OWN, 40);
    assert_int_equal(raft_member_decide(b, 4, false, OWN, &c), RAFT_MEMBER_JOIN);
    assert_int_equal(c, OWN);
}

static void different_groups_conflict(void **state)
{
    (void)state;
    uint64_t c;
    raft_member_probe a[2] = {running(THEIRS, 20), running(OWN, 20)};
    assert_int_equal(decide(a, 2, &c), RAFT_MEMBER_CONFLICT);
    /* bootstrapped, empty, but by other flags */
    raft_member_probe b[2] = {running(THEIRS, 1), fresh()};
    assert_int_equal(decide(b, 2, &c), RAFT_MEMBER_CONFLICT);
}

static void the_group_id_is_the_members_not_their_order(void **state)
{
    (void)state;
    raft_peer a[2] = {{.id = 1, .raft = "127.0.0.1:1"}, {.id = 2, .raft = "127.0.0.1:2"}};
    raft_peer b[2] = {a[1], a[0]};
    raft_peer c[2] = {a[0], {.id = 2, .raft = "127.0.0.1:3"}};
    uint64_t x = raft_member_cluster_id("oracle", a, 2);
    assert_true(x != 0);
    assert_int_equal(x, raft_member_cluster_id("oracle", b, 2));
    assert_true(x != raft_member_cluster_id("service", a, 2));
    assert_true(x != raft_member_cluster_id("oracle", c, 2));
}

static void incarnations_keep_the_member_number(void **state)
{
    (void)state;
    uint64_t a = raft_member_new_incarnation(3), b = raft_member_new_incarnation(3);
    assert_int_equal(raft_member_of(a), 3);
    assert_true(a >> 32 != 0);
    assert_true(a != b || a >> 32 == 0); /* random: equal only by a 1 in 2^32 chance */
    assert_int_equal(raft_member_of(7), 7);
}

static void the_file_round_trips_and_a_bad_one_is_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/pc-identity-XXXXXX", path[64], err[512];
    assert_non_null(mkdtemp(dir));
    raft_member_identity in = {0xabcdef0123456789ULL, (uint64_t)77 << 32 | 2}, out = {0};
    assert_int_equal(raft_member_load(dir, &out, err, sizeof err), 0);
    assert_false(raft_member_has_state(dir));
    assert_int_equal(raft_member_save(dir, &in, err, sizeof err), 0);
    assert_int_equal(raft_member_load(dir, &out, err, sizeof err), 1);
    assert_int_equal(out.cluster, in.cluster);
    assert_int_equal(out.raft_id, in.raft_id);
    snprintf(path, sizeof path, "%s/%s", dir, RAFT_MEMBER_FILE);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("percolator raft member 1\ncluster 0\nraft-id 2\n", f); /* cluster 0 */
    fclose(f);
    assert_int_equal(raft_member_load(dir, &out, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a member file"));
    unlink(path);
    snprintf(path, sizeof path, "%s/metadata1", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_true(raft_member_has_state(dir));
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_new_group_bootstraps_when_the_others_answer),
        cmocka_unit_test(a_majority_counting_itself_is_not_enough),
        cmocka_unit_test(alone_it_waits),
        cmocka_unit_test(any_member_with_the_group_means_join),
        cmocka_unit_test(members_that_join_later_never_bootstrap),
        cmocka_unit_test(different_groups_conflict),
        cmocka_unit_test(the_group_id_is_the_members_not_their_order),
        cmocka_unit_test(incarnations_keep_the_member_number),
        cmocka_unit_test(the_file_round_trips_and_a_bad_one_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
