/* SPDX-License-Identifier: Apache-2.0 */
#include "run.h"
#include "timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Kills pid once it is past deadline; returns its status through status. */
static int reap(pid_t pid, int64_t deadline, int *status)
{
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
        if (medic_time_monotonic() > deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, status, 0) < 0 && errno == EINTR)
                ;
            return -2;
        }
        usleep(10 * 1000);
    }
}

int medic_run(const char *const *argv, char *const *env, long timeout_ms, char *out, size_t size)
{
    int pipefd[2];
    out[0] = '\0';
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        snprintf(out, size, "pipe: %s", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDERR_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, env ? env : environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    if (rc != 0) {
        close(pipefd[0]);
        snprintf(out, size, "cannot run %s: %s", argv[0], strerror(rc));
        return -1;
    }
    size_t len = 0;
    int64_t deadline = medic_time_monotonic() + (int64_t)timeout_ms * MEDIC_NS_PER_MS;
    int status = 0;
    for (;;) {
        int64_t left = (deadline - medic_time_monotonic()) / MEDIC_NS_PER_MS;
        if (left <= 0)
            break; /* reap kills it */
        struct pollfd p = {pipefd[0], POLLIN, 0};
        int ready = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
        if (ready < 0 && errno != EINTR)
            break;
        if (ready > 0) {
            char chunk[512];
            ssize_t got = read(pipefd[0], chunk, sizeof(chunk));
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                break; /* EOF: it closed its output */
            size_t take = (size_t)got < size - 1 - len ? (size_t)got : size - 1 - len;
            memcpy(out + len, chunk, take);
            len += take;
            out[len] = '\0';
        }
    }
    close(pipefd[0]);
    /* output closed (or the deadline passed): wait for the exit, still
     * within the deadline */
    int reaped = reap(pid, deadline, &status);
    if (reaped)
        return reaped == -2 ? -2 : -1;
    while (len && (out[len - 1] == '\n' || out[len - 1] == ' '))
        out[--len] = '\0';
    if (!WIFEXITED(status)) {
        if (len == 0)
            snprintf(out, size, "%s died of signal %d", argv[0],
                     WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        return -1;
    }
    return WEXITSTATUS(status);
}
