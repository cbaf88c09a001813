/*
 * proc.c — start, wait for and stop the programs under test (testlib.h).
 *
 * Only pids started here are ever signalled; they are kept in a small table
 * so that an atexit hook can kill whatever a failing test left running.
 */
#include "testlib.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_CHILDREN 256

static pid_t children[MAX_CHILDREN];
static pthread_mutex_t children_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atexit_once = PTHREAD_ONCE_INIT;

void tl_kill_started(void)
{
    pthread_mutex_lock(&children_mu);
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (children[i] > 0) {
            kill(children[i], SIGKILL);
            waitpid(children[i], NULL, 0);
            children[i] = 0;
        }
    }
    pthread_mutex_unlock(&children_mu);
}

static void register_atexit(void)
{
    atexit(tl_kill_started);
}

static void remember(pid_t pid)
{
    pthread_mutex_lock(&children_mu);
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (children[i] == 0) {
            children[i] = pid;
            break;
        }
    }
    pthread_mutex_unlock(&children_mu);
}

static bool ours(pid_t pid)
{
    bool found = false;
    pthread_mutex_lock(&children_mu);
    for (int i = 0; i < MAX_CHILDREN && !found; i++)
        found = children[i] == pid;
    pthread_mutex_unlock(&children_mu);
    return pid > 0 && found;
}

static void forget(pid_t pid)
{
    pthread_mutex_lock(&children_mu);
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] == pid)
            children[i] = 0;
    pthread_mutex_unlock(&children_mu);
}

const char *tl_bin_dir(void)
{
    const char *d = getenv("PERCOLATOR_BIN_DIR");
    return d && *d ? d : "bin";
}

/* Does env entry e set the same variable as one of extra? */
static bool overridden(const char *e, const char *const extra[])
{
    const char *eq = strchr(e, '=');
    size_t n = eq ? (size_t)(eq - e) : strlen(e);
    for (int i = 0; extra && extra[i]; i++)
        if (strncmp(extra[i], e, n) == 0 && extra[i][n] == '=')
            return true;
    return false;
}

int tl_exec_vectors(const char *path, const char *const args[], const char *const env[],
                    char ***argv_out, char ***envp_out)
{
    size_t nargs = 0, nenv = 0, nextra = 0;
    while (args && args[nargs])
        nargs++;
    while (environ[nenv])
        nenv++;
    while (env && env[nextra])
        nextra++;
    char **argv = calloc(nargs + 2, sizeof *argv);
    char **envp = calloc(nenv + nextra + 1, sizeof *envp);
    if (!argv || !envp) {
        free(argv);
        free(envp);
        return -1;
    }
    argv[0] = (char *)path;
    for (size_t i = 0; i < nargs; i++)
        argv[i + 1] = (char *)args[i];
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++)
        if (!overridden(environ[i], env))
            envp[k++] = environ[i];
    for (size_t i = 0; i < nextra; i++)
        envp[k++] = (char *)env[i];
    *argv_out = argv;
    *envp_out = envp;
    return 0;
}

pid_t tl_spawn(const char *prog, const char *const args[], const char *const env[],
               const char *log_path)
{
    pthread_once(&atexit_once, register_atexit);
    char path[1024];
    if (strchr(prog, '/'))
        snprintf(path, sizeof path, "%s", prog);
    else
        snprintf(path, sizeof path, "%s/%s", tl_bin_dir(), prog);

    /* Build argv and envp before fork: the child only calls
     * async-signal-safe functions. */
    char **argv = NULL, **envp = NULL;
    pid_t pid = -1;
    int fd = -1;
    if (tl_exec_vectors(path, args, env, &argv, &envp) != 0)
        goto done;

    fd = open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        goto done;
    pid_t parent = getpid();
    pid = fork();
    if (pid == 0) {
        /* Die with the test, whatever kills it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        execve(path, argv, envp);
        _exit(127);
    }
    if (pid > 0) {
        remember(pid);
        tl_exchange_program(prog, args);
    }
done:
    if (fd >= 0)
        close(fd);
    free(argv);
    free(envp);
    return pid;
}

static int decode_status(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return -1;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void nap_ms(unsigned ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

int tl_wait_exit(pid_t pid, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            forget(pid);
            return decode_status(st);
        }
        if (r < 0 && errno != EINTR)
            return -1;
        if (now_ms() >= deadline)
            return -1;
        nap_ms(5);
    }
}

int tl_stop(pid_t pid, int timeout_ms)
{
    if (!ours(pid))
        return -1;
    kill(pid, SIGTERM);
    int rc = tl_wait_exit(pid, timeout_ms);
    if (rc == -1) {
        fprintf(stderr, "testlib: pid %d ignored SIGTERM for %d ms; SIGKILL\n", (int)pid, timeout_ms);
        kill(pid, SIGKILL);
        tl_wait_exit(pid, 10000);
        return -1; /* not a clean stop */
    }
    return rc;
}

int tl_kill9(pid_t pid)
{
    if (!ours(pid))
        return -1;
    if (kill(pid, SIGKILL) != 0)
        return -1;
    return tl_wait_exit(pid, 10000) == 128 + SIGKILL ? 0 : -1;
}

int tl_wait_health(const char *base_url, pid_t pid, int timeout_ms)
{
    char url[512];
    snprintf(url, sizeof url, "%s/v1/health", base_url);
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    while (now_ms() < deadline) {
        if (pid > 0) {
            int st;
            if (waitpid(pid, &st, WNOHANG) == pid) {
                forget(pid);
                return -1; /* it exited */
            }
        }
        tl_resp r;
        int rc = tl_http("GET", url, NULL, 0, NULL, 1000, &r);
        long status = r.status;
        tl_resp_free(&r);
        if (rc == 0 && status == 200)
            return 0;
        nap_ms(10);
    }
    return -1;
}
