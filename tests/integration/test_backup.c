/*
 * test_backup.c — an online backup under load, restored into a new data
 * dir (README "Backup and restore", DESIGN §4.9):
 *
 *  - while a writer commits keys one by one and bank clients move money
 *    between accounts, POST /v1/admin/backup copies the store;
 *  - a second service started with --restore-from on a new data dir has
 *    every key whose commit was acknowledged before the backup began, with
 *    its commit_ts, and the bank's total is whole (snapshot isolation
 *    held in the copy);
 *  - without --backup-dir the route answers 409 backup_unavailable; a
 *    restore over an existing data dir is refused;
 *  - back-to-back backups of an idle store each hold the store once: every
 *    one is about the size of the first (they grew by a 64 MiB log file
 *    each, and the data dir kept those files), and the data dir's log
 *    files are archived again; with --backup-keep 3 only the newest three
 *    stay in --backup-dir;
 *  - while a backup runs (held by the failpoint backup_copy=sleep), a
 *    second request answers 409 backup_unavailable with Retry-After and
 *    makes no directory; the first completes;
 *  - a backup that fails (backup_copy=error) answers 500 and removes its
 *    partial copy, and the next one is not refused as running;
 *  - `percolator backup save FILE` under writes: tar reads the archive;
 *    `percolator backup restore FILE --dir DIR` makes a data dir holding
 *    every write acknowledged before the save; restoring over a dir, or an
 *    archive cut short, is refused and leaves nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bank.h"
#include "svc_fixture.h"
#include "timeutil.h"

#define MAX_WRITES 20000
#define ACCOUNTS 4
#define TOTAL (ACCOUNTS * 100)

static tl_stack ST;
static atomic_bool stop;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t acked_ts[MAX_WRITES]; /* commit_ts of key w<i>, in order */
static int acked;                      /* writes acknowledged so far */

/* Commit w0, w1, ... one by one, recording each acknowledged commit_ts. */
static void *writer_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < MAX_WRITES && !atomic_load(&stop); i++) {
        char path[64], body[64];
        snprintf(path, sizeof path, "/v1/kv/w%05d", i);
        snprintf(body, sizeof body, "{\"value\":\"v%d\"}", i);
        json_t *j = NULL;
        long status = tl_try_call(&ST, "PUT", path, body, &j);
        if (status != 200) {
            fprintf(stderr, "writer: PUT %s answered %ld\n", path, status);
            json_decref(j);
            break;
        }
        pthread_mutex_lock(&mu);
        acked_ts[acked++] = (uint64_t)json_integer_value(json_object_get(j, "commit_ts"));
        pthread_mutex_unlock(&mu);
        json_decref(j);
    }
    return NULL;
}

static void *bank_main(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (int i = 0; i < 100000 && !atomic_load(&stop); i++) {
        char a[16], b[16];
        int from = rand_r(&seed) % ACCOUNTS, to = (from + 1) % ACCOUNTS;
        snprintf(a, sizeof a, "acct/%d", from);
        snprintf(b, sizeof b, "acct/%d", to);
        tl_transfer r = tl_bank_transfer(&ST, i % 2 == 0, a, b, rand_r(&seed) % 50, NULL);
        if (r.status != 200 && r.status != 409) {
            fprintf(stderr, "bank: a transfer answered %ld\n", r.status);
            break;
        }
    }
    return NULL;
}

static int acked_now(void)
{
    pthread_mutex_lock(&mu);
    int n = acked;
    pthread_mutex_unlock(&mu);
    return n;
}

static void wait_acked(int n)
{
    for (int i = 0; i < 3000 && acked_now() < n; i++)
        time_sleep_ms(10);
    assert_true(acked_now() >= n);
}

static json_t *get(const char *base, const char *path, long *status)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", base, path);
    tl_resp r;
    assert_int_equal(tl_http("GET", url, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    *status = r.status;
    json_t *j = json_loadb(r.body, r.len, 0, NULL);
    tl_resp_free(&r);
    return j;
}

/* Start ST with --backup-dir <its dir>/backups (written into backups) and
 * the environment entry env (NULL: none). */
static void start_with_backups(char *backups, size_t cap, const char *env)
{
    assert_int_equal(tl_stack_start(&ST, NULL), 0);
    assert_int_equal(tl_service_stop(&ST), 0);
    snprintf(backups, cap, "%s/backups", ST.dir);
    snprintf(ST.svc.args[ST.svc.nargs++], sizeof ST.svc.args[0], "--backup-dir");
    assert_true(strlen(backups) < sizeof ST.svc.args[0]);
    snprintf(ST.svc.args[ST.svc.nargs++], sizeof ST.svc.args[0], "%.127s", backups);
    if (env != NULL)
        snprintf(ST.svc.env[ST.svc.nenv++], sizeof ST.svc.env[0], "%s", env);
    assert_int_equal(tl_service_start(&ST), 0);
}

/* Entries of dir whose names start with prefix (. and .. never count). */
static int count_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d != NULL && (de = readdir(d)) != NULL;)
        if (de->d_name[0] != '.' && strncmp(de->d_name, prefix, strlen(prefix)) == 0)
            n++;
    if (d != NULL)
        closedir(d);
    return n;
}

static void a_backup_under_load_restores_every_acknowledged_commit(void **state)
{
    (void)state;
    char backups[700];
    start_with_backups(backups, sizeof backups, NULL);
    for (int i = 0; i < ACCOUNTS; i++) {
        char path[32];
        snprintf(path, sizeof path, "/v1/kv/acct%%2F%d", i);
        json_decref(tl_must(&ST, "PUT", path, "{\"value\":\"100\"}", 200));
    }

    pthread_t w, bank[2];
    atomic_store(&stop, false);
    assert_int_equal(tl_thread_start(&w, writer_main, NULL), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(tl_thread_start(&bank[i], bank_main, (void *)(uintptr_t)(i + 7)), 0);
    wait_acked(200);

    /* Every write acknowledged now must be in the backup. */
    int before = acked_now();
    json_t *b = tl_must(&ST, "POST", "/v1/admin/backup", NULL, 201);
    int during = acked_now();
    const char *path = json_string_value(json_object_get(b, "path"));
    assert_non_null(path);
    char backup[700];
    snprintf(backup, sizeof backup, "%s", path);
    print_message("backup %s: %lld files, %lld bytes in %.3f s, while %d more writes were "
                  "acknowledged\n", backup, (long long)json_integer_value(json_object_get(b, "files")),
                  (long long)json_integer_value(json_object_get(b, "bytes")),
                  json_real_value(json_object_get(b, "seconds")), during - before);
    json_decref(b);
    wait_acked(during + 100); /* the store goes on */
    atomic_store(&stop, true);
    tl_thread_join(w, NULL);
    for (int i = 0; i < 2; i++)
        tl_thread_join(bank[i], NULL);

    /* Restore into a new data dir, next to the running service. */
    char data[760], log[760], listen[64], url[64];
    snprintf(data, sizeof data, "%s/restored", ST.dir);
    snprintf(log, sizeof log, "%s/restored.log", ST.dir);
    int port = tl_free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    const char *args[] = {"--listen", listen, "--data-dir", data, "--oracle", ST.oracle.url,
                          "--restore-from", backup, NULL};
    pid_t pid = tl_spawn("percolator-service", args, NULL, log);
    assert_true(pid > 0);
    if (tl_wait_health(url, pid, TL_START_MS) != 0)
        tl_dump_file(log);

    long st;
    int found_after = 0;
    for (int i = 0; i < acked_now(); i++) {
        char key[32];
        snprintf(key, sizeof key, "/v1/kv/w%05d", i);
        json_t *j = get(url, key, &st);
        if (i < before) {
            if (st != 200)
                fail_msg("w%05d, acknowledged before the backup began, answers %ld", i, st);
            assert_int_equal((uint64_t)json_integer_value(json_object_get(j, "commit_ts")),
                             acked_ts[i]);
        } else if (st == 200) {
            found_after++;
        }
        json_decref(j);
    }
    /* The bank's total is whole in the copy (one snapshot). */
    json_t *j = get(url, "/v1/kv?prefix=acct/", &st);
    assert_int_equal(st, 200);
    long sum = 0;
    json_t *items = json_object_get(j, "items");
    for (size_t i = 0; i < json_array_size(items); i++)
        sum += tl_bank_balance(json_array_get(items, i));
    size_t naccounts = json_array_size(items);
    json_decref(j);
    print_message("restored: all %d writes acknowledged before the backup, %d of the later ones; "
                  "bank total %ld of %d\n", before, found_after, sum, TOTAL);
    assert_int_equal(naccounts, ACCOUNTS);
    assert_int_equal(sum, TOTAL);

    /* That service has no --backup-dir: no backups. */
    char post[96];
    snprintf(post, sizeof post, "%s/v1/admin/backup", url);
    tl_resp r;
    assert_int_equal(tl_http("POST", post, NULL, 0, NULL, TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 409);
    assert_non_null(strstr(r.body, "backup_unavailable"));
    tl_resp_free(&r);
    assert_int_equal(tl_stop(pid, TL_STOP_MS), 0);

    /* A restore never writes over a data dir. */
    pid = tl_spawn("percolator-service", args, NULL, log);
    assert_int_equal(tl_wait_exit(pid, TL_STOP_MS), 2);
    assert_int_equal(tl_stack_stop(&ST), 0);
}

/* Whether the copies archives were sent from are gone from the data dir
 * within ms (the service removes one when its reply is over, which may be
 * just after the client has read the last byte). */
static bool stream_copies_gone(int ms)
{
    for (int i = 0; i < ms / 10 && count_entries(ST.svc.data, "stream-backup-") > 0; i++)
        time_sleep_ms(10);
    return count_entries(ST.svc.data, "stream-backup-") == 0;
}

/* `percolator backup save FILE` while a writer commits: the archive is
 * one that tar reads; `percolator backup restore FILE --dir DIR` makes a
 * directory a service serves as its --data-dir, holding every write
 * acknowledged before the save began, with its commit_ts; the copy the
 * service made to send is gone after; a restore over an existing dir, or
 * of an archive cut short, is refused (exit 2) and leaves nothing. */
static void a_saved_archive_restores_as_a_data_dir(void **state)
{
    (void)state;
    assert_int_equal(tl_stack_start(&ST, NULL), 0);
    pthread_t w;
    atomic_store(&stop, false);
    acked = 0;
    assert_int_equal(tl_thread_start(&w, writer_main, NULL), 0);
    wait_acked(100);
    int before = acked_now();
    char file[700], dir[700], cut[700];
    snprintf(file, sizeof file, "%s/saved.tar", ST.dir);
    snprintf(dir, sizeof dir, "%s/from-archive", ST.dir);
    snprintf(cut, sizeof cut, "%s/cut.tar", ST.dir);
    const char *save[] = {"--endpoint", ST.svc.url, "backup", "save", file, NULL};
    tl_run_result r;
    assert_int_equal(tl_run("percolator", save, NULL, NULL, 0, 60000, &r), 0);
    if (r.status != 0)
        fail_msg("backup save: exit %d: %s", r.status, r.err);
    print_message("%s", r.out);
    tl_run_free(&r);
    wait_acked(before + 50); /* the store went on */
    atomic_store(&stop, true);
    tl_thread_join(w, NULL);
    assert_true(stream_copies_gone(30000));

    /* The route as any HTTP client sees it (and the spec check): a tar
     * archive, as long as it says, whose first member is a file. */
    char url0[128], ctype[128];
    snprintf(url0, sizeof url0, "%s/v1/admin/backup", ST.svc.url);
    tl_resp hr;
    assert_int_equal(tl_http("GET", url0, NULL, 0, NULL, 60000, &hr), 0);
    assert_int_equal(hr.status, 200);
    assert_non_null(tl_resp_header(&hr, "Content-Type", ctype, sizeof ctype));
    assert_string_equal(ctype, "application/x-tar");
    assert_true(hr.len > 1024 && hr.len % 512 == 0);
    assert_string_equal(hr.body + 257, "ustar");
    tl_resp_free(&hr);
    assert_true(stream_copies_gone(30000));

    /* tar reads it: WiredTiger's metadata and the tables are in it. */
    const char *list[] = {"-tf", file, NULL};
    assert_int_equal(tl_run("/bin/tar", list, NULL, NULL, 0, TL_REQUEST_MS, &r), 0);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "WiredTiger\n"));
    assert_non_null(strstr(r.out, "data.wt\n"));
    tl_run_free(&r);

    const char *restore[] = {"backup", "restore", file, "--dir", dir, NULL};
    assert_int_equal(tl_run("percolator", restore, NULL, NULL, 0, 60000, &r), 0);
    assert_int_equal(r.status, 0);
    tl_run_free(&r);
    assert_int_equal(tl_run("percolator", restore, NULL, NULL, 0, 60000, &r), 0);
    assert_int_equal(r.status, 2); /* DIR exists */
    tl_run_free(&r);

    /* An archive cut short: refused, nothing made. */
    FILE *in = fopen(file, "rb"), *out = fopen(cut, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[4096];
    for (int k = 0; k < 40; k++) {
        size_t n = fread(buf, 1, sizeof buf, in);
        assert_int_equal(fwrite(buf, 1, n, out), n);
    }
    fclose(in);
    fclose(out);
    char cut_dir[720];
    snprintf(cut_dir, sizeof cut_dir, "%s-cut", dir);
    const char *bad[] = {"backup", "restore", cut, "--dir", cut_dir, NULL};
    assert_int_equal(tl_run("percolator", bad, NULL, NULL, 0, 60000, &r), 0);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "cut short"));
    tl_run_free(&r);
    struct stat sb;
    assert_int_not_equal(stat(cut_dir, &sb), 0);

    /* The directory serves as a data dir. */
    char log[760], listen[64], url[64];
    snprintf(log, sizeof log, "%s/from-archive.log", ST.dir);
    int port = tl_free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    const char *args[] = {"--listen", listen, "--data-dir", dir, "--oracle", ST.oracle.url, NULL};
    pid_t pid = tl_spawn("percolator-service", args, NULL, log);
    assert_true(pid > 0);
    if (tl_wait_health(url, pid, TL_START_MS) != 0)
        tl_dump_file(log);
    for (int i = 0; i < before; i++) {
        char key[32];
        long st;
        snprintf(key, sizeof key, "/v1/kv/w%05d", i);
        json_t *j = get(url, key, &st);
        if (st != 200)
            fail_msg("w%05d, acknowledged before the save began, answers %ld", i, st);
        assert_int_equal((uint64_t)json_integer_value(json_object_get(j, "commit_ts")),
                         acked_ts[i]);
        json_decref(j);
    }
    print_message("restored from the archive: all %d writes acknowledged before the save\n",
                  before);
    assert_int_equal(tl_stop(pid, TL_STOP_MS), 0);
    assert_int_equal(tl_stack_stop(&ST), 0);
}

#define BACK_TO_BACK 8

static void back_to_back_backups_hold_the_store_once(void **state)
{
    (void)state;
    char backups[700], names[BACK_TO_BACK][64];
    /* --backup-keep 3: the newest three stay. */
    start_with_backups(backups, sizeof backups, "PERCOLATOR_BACKUP_KEEP=3");
    for (int i = 0; i < 500; i++) {
        char path[32];
        snprintf(path, sizeof path, "/v1/kv/k%04d", i);
        json_decref(tl_must(&ST, "PUT", path, "{\"value\":\"some data to back up\"}", 200));
    }
    /* Nothing is written in between: the store stays idle, as it was when
     * each backup added one more log file than the one before. */
    long long bytes[BACK_TO_BACK], files[BACK_TO_BACK];
    for (int i = 0; i < BACK_TO_BACK; i++) {
        json_t *b = tl_must(&ST, "POST", "/v1/admin/backup", NULL, 201);
        bytes[i] = (long long)json_integer_value(json_object_get(b, "bytes"));
        files[i] = (long long)json_integer_value(json_object_get(b, "files"));
        snprintf(names[i], sizeof names[i], "%s",
                 json_string_value(json_object_get(b, "name")));
        print_message("backup %d: %lld files, %lld bytes (%.1f MiB)\n", i + 1, files[i],
                      bytes[i], (double)bytes[i] / (1 << 20));
        json_decref(b);
    }
    for (int i = 1; i < BACK_TO_BACK; i++) {
        if (bytes[i] > bytes[0] + bytes[0] / 2 || files[i] > files[0] + 1)
            fail_msg("backup %d holds %lld bytes in %lld files, the first %lld in %lld", i + 1,
                     bytes[i], files[i], bytes[0], files[0]);
    }
    assert_int_equal(count_entries(backups, "backup-"), 3);
    for (int i = 0; i < BACK_TO_BACK; i++) {
        char path[1400];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", backups, names[i]);
        assert_int_equal(stat(path, &sb) == 0, i >= BACK_TO_BACK - 3);
    }

    /* The data dir keeps no log file for them: the archiver removes those
     * before the last checkpoint's (in the background: waited for, up to
     * 30 s). */
    int logs = 0;
    for (int i = 0; i < 300 && (logs = count_entries(ST.svc.data, "WiredTigerLog.")) > 3; i++)
        time_sleep_ms(100);
    print_message("data dir: %d WiredTiger log files after %d backups\n", logs, BACK_TO_BACK);
    assert_true(logs <= 3);
    assert_int_equal(tl_stack_stop(&ST), 0);
}

typedef struct {
    long status;
    json_t *body;
    atomic_bool done;
} async_call;

static void *backup_main(void *arg)
{
    async_call *c = arg;
    c->status = tl_try_call(&ST, "POST", "/v1/admin/backup", NULL, &c->body);
    atomic_store(&c->done, true);
    return NULL;
}

static void a_second_backup_while_one_runs_answers_409(void **state)
{
    (void)state;
    char backups[700];
    /* The failpoint holds every backup 15 s after its first file: long
     * enough that the second request comes meanwhile on a loaded machine. */
    start_with_backups(backups, sizeof backups, "PERCOLATOR_FAILPOINT=backup_copy=sleep:15000");
    json_decref(tl_must(&ST, "PUT", "/v1/kv/k", "{\"value\":\"v\"}", 200));

    async_call first = {0, NULL, false};
    pthread_t t;
    assert_int_equal(tl_thread_start(&t, backup_main, &first), 0);
    /* Its directory appears once it runs (within 60 s, however loaded the
     * machine); it is then held for 15 s. */
    for (uint64_t t0 = time_mono_ms();
         count_entries(backups, "backup-") == 0 && time_mono_ms() - t0 < 60000;)
        time_sleep_ms(10);
    assert_int_equal(count_entries(backups, "backup-"), 1);

    tl_resp r;
    tl_call_raw(&ST, "POST", "/v1/admin/backup", NULL, 0, NULL, &r);
    bool first_done = atomic_load(&first.done);
    tl_thread_join(t, NULL); /* before any assertion: the thread uses ST */
    char retry[16];
    print_message("second backup: %ld %s\n", r.status, r.body);
    assert_int_equal(r.status, 409);
    json_t *j = json_loadb(r.body, r.len, 0, NULL);
    assert_string_equal(tl_error_code(j), "backup_unavailable");
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(j, "error"),
                                                             "message")),
                           "another backup is running"));
    json_decref(j);
    assert_non_null(tl_resp_header(&r, "Retry-After", retry, sizeof retry));
    tl_resp_free(&r);
    assert_false(first_done); /* the answer came while the first one ran */
    assert_int_equal(first.status, 201);
    const char *name = json_string_value(json_object_get(first.body, "name"));
    assert_non_null(name);
    /* Only the first's directory: the refused one made none. */
    assert_int_equal(count_entries(backups, "backup-"), 1);
    assert_int_equal(count_entries(backups, name), 1);
    json_decref(first.body);
    /* And the next one runs. */
    json_decref(tl_must(&ST, "POST", "/v1/admin/backup", NULL, 201));
    assert_int_equal(count_entries(backups, "backup-"), 2);
    assert_int_equal(tl_stack_stop(&ST), 0);
}

static void a_failed_backup_leaves_nothing(void **state)
{
    (void)state;
    char backups[700];
    /* The failpoint fails every backup after its first file. */
    start_with_backups(backups, sizeof backups, "PERCOLATOR_FAILPOINT=backup_copy=error");
    json_decref(tl_must(&ST, "PUT", "/v1/kv/k", "{\"value\":\"v\"}", 200));
    for (int i = 0; i < 2; i++) { /* the second is not refused as running */
        json_t *j = tl_must(&ST, "POST", "/v1/admin/backup", NULL, 500);
        assert_string_equal(tl_error_code(j), "internal");
        json_decref(j);
        assert_int_equal(count_entries(backups, ""), 0);
    }
    char *log = tl_read_file(ST.svc.log, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, "the partial copy is removed"));
    free(log);
    assert_int_equal(tl_stack_stop(&ST), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TL_TEST(a_backup_under_load_restores_every_acknowledged_commit),
        TL_TEST(back_to_back_backups_hold_the_store_once),
        TL_TEST(a_second_backup_while_one_runs_answers_409),
        TL_TEST(a_failed_backup_leaves_nothing),
        TL_TEST(a_saved_archive_restores_as_a_data_dir),
    };
    /* PERCOLATOR_TEST_ONLY=<name>: run one test (cmocka's filter). */
    if (getenv("PERCOLATOR_TEST_ONLY") != NULL)
        cmocka_set_test_filter(getenv("PERCOLATOR_TEST_ONLY"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
