/* SPDX-License-Identifier: Apache-2.0 */
#include "slurm.h"
#include "slurm_text.h"
#include "run.h"
#include "utf8.h"
#include "timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define REASON_MAX 200

void slurm_options_default(struct slurm_options *o)
{
    o->scontrol = "scontrol";
    o->slurm_conf = NULL;
    o->timeout_ms = 10000;
    o->fence = NULL;
}

int slurm_scontrol(const struct slurm_options *o, const char *const *args, char *out, size_t size)
{
    /* the environment: ours, with SLURM_CONF set when configured */
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof(*env));
    if (!env) {
        snprintf(out, size, "cannot run %s: out of memory", o->scontrol);
        return -1;
    }
    char conf[4200];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!o->slurm_conf || strncmp(environ[i], "SLURM_CONF=", 11) != 0)
            env[k++] = environ[i];
    if (o->slurm_conf) {
        snprintf(conf, sizeof(conf), "SLURM_CONF=%s", o->slurm_conf);
        env[k++] = conf;
    }
    const char *argv[16];
    size_t a = 0;
    argv[a++] = o->scontrol;
    for (size_t i = 0; args[i] && a < 15; i++)
        argv[a++] = args[i];
    argv[a] = NULL;
    int rc = medic_run(argv, env, o->timeout_ms, out, size);
    free(env);
    return rc;
}

/* The node's one line (`scontrol show node -o NODE`) into out: 0, or -1
 * with detail. */
static int show_node(const struct slurm_options *o, const char *node, char *out, size_t out_size,
                     char *detail, size_t size)
{
    const char *args[] = {"show", "node", "-o", node, NULL};
    int rc = slurm_scontrol(o, args, out, out_size);
    if (rc != 0) {
        snprintf(detail, size, "scontrol show node %s: %s", node,
                 rc == -2 ? "timed out" : (out[0] ? out : "failed"));
        return -1;
    }
    return 0;
}

int slurm_read_node(const struct slurm_options *o, const char *node, char *state, size_t state_size,
                    char *reason, size_t reason_size, char *detail, size_t size)
{
    char out[8192];
    if (show_node(o, node, out, sizeof(out), detail, size))
        return -1;
    slurm_field(out, strlen(out), "State", state, state_size);
    slurm_field(out, strlen(out), "Reason", reason, reason_size);
    if (!state[0]) {
        snprintf(detail, size, "scontrol show node %s: no State in its answer", node);
        return -1;
    }
    return 0;
}

int slurm_may_update(const struct slurm_options *o, char *detail, size_t size)
{
    char out[2048];
    const char *args[] = {"update", "NodeName=" SLURM_PROBE_NODE, "State=RESUME", NULL};
    int rc = slurm_scontrol(o, args, out, sizeof(out));
    out[strcspn(out, "\n")] = '\0';
    int allowed = rc != 0 && strstr(out, "Invalid node name") ? 1
                  : strstr(out, "Invalid user id") || strstr(out, "ccess denied") ||
                          strstr(out, "ermission denied")
                      ? 0
                      : -1;
    if (rc == -2)
        snprintf(detail, size, "scontrol %s ran past %d ms", args[0], o->timeout_ms);
    else if (rc == -1)
        snprintf(detail, size, "cannot run %s: %s", o->scontrol, out);
    else
        snprintf(detail, size, "scontrol update NodeName=%s State=RESUME: %s (exit %d)",
                 SLURM_PROBE_NODE, out[0] ? out : "no output", rc);
    return rc < 0 ? -1 : allowed;
}

int64_t slurm_time_parse(const char *text)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end || *end)
        return -1;
    tm.tm_isdst = -1; /* Slurm prints the host's local time */
    time_t t = mktime(&tm);
    return t == (time_t)-1 ? -1 : (int64_t)t * MEDIC_NS_PER_SEC;
}

int slurm_node_started(const struct slurm_options *o, const char *node, int64_t *started,
                       char *detail, size_t size)
{
    char out[8192], boot[64], slurmd[64];
    if (show_node(o, node, out, sizeof(out), detail, size))
        return -1;
    slurm_field(out, strlen(out), "BootTime", boot, sizeof(boot));
    slurm_field(out, strlen(out), "SlurmdStartTime", slurmd, sizeof(slurmd));
    int64_t b = slurm_time_parse(boot), s = slurm_time_parse(slurmd);
    *started = b > s ? b : s;
    if (*started < 0)
        *started = 0;
    snprintf(detail, size, "BootTime=%s SlurmdStartTime=%s", boot[0] ? boot : "none",
             slurmd[0] ? slurmd : "none");
    return 0;
}

/* A character of a reason medic writes: control characters become
 * spaces; '=' and brackets, which Slurm's own listing uses to delimit
 * fields and the reason's stamp, become ':' and parentheses, so that no
 * text quoted from an alert can make the reason read as something else. */
static char clean_char(char c)
{
    if ((unsigned char)c < 0x20)
        return ' ';
    return c == '=' ? ':' : c == '[' ? '(' : c == ']' ? ')' : c;
}

/* The reason Slurm keeps (REASON_MAX bytes): cleaned by clean_char,
 * and when it is too long the text is cut at a UTF-8 boundary
 * while medic's mark at its end stays whole, since the mark is how a
 * resume knows the drain is medic's own. */
static void fit_reason(const char *reason, char *out, size_t size)
{
    const char *mark = NULL;
    for (const char *p = strstr(reason, SLURM_MEDIC_MARK); p; p = strstr(p + 1, SLURM_MEDIC_MARK))
        mark = p;
    size_t len = strlen(reason);
    size_t tail = mark ? len - (size_t)(mark - reason) : 0;
    if (tail + 2 > size)
        tail = 0; /* a mark that cannot fit whole is cut like any text */
    size_t text = len - tail;
    if (text + tail >= size)
        text = medic_utf8_boundary(reason, size - 1 - tail - (tail ? 1 : 0));
    if (text > len - tail)
        text = len - tail;
    size_t n = 0;
    for (size_t i = 0; i < text; i++)
        out[n++] = clean_char(reason[i]);
    if (tail && text < len - tail)
        out[n++] = ' ';
    for (size_t i = len - tail; i < len; i++)
        out[n++] = clean_char(reason[i]);
    out[n] = '\0';
}

static int drained(const char *state)
{
    return strstr(state, "DRAIN") != NULL;
}

enum medic_outcome slurm_drain(const struct slurm_options *o, const char *node, const char *reason,
                               char *detail, size_t size)
{
    char state[256], current[1024], out[2048];
    if (slurm_read_node(o, node, state, sizeof(state), current, sizeof(current), detail, size))
        return strstr(detail, "timed out") ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_FAILED;
    if (drained(state) && !strstr(current, SLURM_MEDIC_MARK)) {
        snprintf(detail, size,
                 MEDIC_DRAIN_FOUND_PREFIX " (State=%s Reason=%s): an operator's drain, left as "
                                          "it is; medic will not resume it",
                 state, current);
        return MEDIC_OUTCOME_SUCCEEDED;
    }
    char clean[REASON_MAX + 1];
    fit_reason(reason ? reason : "medic", clean, sizeof(clean));
    char node_arg[300], reason_arg[REASON_MAX + 16];
    snprintf(node_arg, sizeof(node_arg), "NodeName=%s", node);
    snprintf(reason_arg, sizeof(reason_arg), "Reason=%s", clean);
    const char *args[] = {"update", node_arg, "State=DRAIN", reason_arg, NULL};
    if (action_fenced(o->fence, detail, size))
        return MEDIC_OUTCOME_REFUSED;
    int rc = slurm_scontrol(o, args, out, sizeof(out));
    if (rc != 0) {
        snprintf(detail, size, "scontrol update %s State=DRAIN: %s", node,
                 rc == -2 ? "timed out" : (out[0] ? out : "failed"));
        return rc == -2 ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_FAILED;
    }
    if (slurm_read_node(o, node, state, sizeof(state), current, sizeof(current), detail, size))
        return MEDIC_OUTCOME_FAILED;
    if (!drained(state)) {
        snprintf(detail, size, "drain accepted but the node reads State=%s", state);
        return MEDIC_OUTCOME_FAILED;
    }
    snprintf(detail, size, MEDIC_DRAIN_DETAIL_PREFIX "State=%s" MEDIC_DRAIN_DETAIL_REASON "%s\"",
             state, current);
    return MEDIC_OUTCOME_SUCCEEDED;
}

enum medic_outcome slurm_resume(const struct slurm_options *o, const char *node,
                                const char *drained_as, char *detail, size_t size)
{
    char state[256], current[1024], out[2048];
    if (slurm_read_node(o, node, state, sizeof(state), current, sizeof(current), detail, size))
        return strstr(detail, "timed out") ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_FAILED;
    if (!drained(state)) {
        snprintf(detail, size, "not drained (State=%s): nothing to resume", state);
        return MEDIC_OUTCOME_SUCCEEDED;
    }
    if (drained_as && *drained_as && strcmp(current, drained_as) != 0) {
        snprintf(detail, size,
                 "drained again by someone else since medic's drain (Reason=%s; medic's drain "
                 "left Reason=%s): medic resumes only its own drains, left as it is",
                 current, drained_as);
        return MEDIC_OUTCOME_REFUSED; /* medic's drain is gone: not medic's to undo */
    }
    if (!strstr(current, SLURM_MEDIC_MARK)) {
        snprintf(detail, size,
                 "drained by someone else (Reason=%s): medic resumes only its own drains", current);
        return MEDIC_OUTCOME_REFUSED;
    }
    char node_arg[300];
    snprintf(node_arg, sizeof(node_arg), "NodeName=%s", node);
    const char *args[] = {"update", node_arg, "State=RESUME", NULL};
    /* fenced like a drain: a leader that lost its lease never returns a
     * node to service behind the new leader's back */
    if (action_fenced(o->fence, detail, size))
        return MEDIC_OUTCOME_REFUSED;
    int rc = slurm_scontrol(o, args, out, sizeof(out));
    if (rc != 0) {
        snprintf(detail, size, "scontrol update %s State=RESUME: %s", node,
                 rc == -2 ? "timed out" : (out[0] ? out : "failed"));
        return rc == -2 ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_FAILED;
    }
    if (slurm_read_node(o, node, state, sizeof(state), current, sizeof(current), detail, size))
        return MEDIC_OUTCOME_FAILED;
    if (drained(state)) {
        snprintf(detail, size, "resume accepted but the node still reads State=%s", state);
        return MEDIC_OUTCOME_FAILED;
    }
    snprintf(detail, size, "resumed: State=%s", state);
    return MEDIC_OUTCOME_SUCCEEDED;
}

enum medic_outcome slurm_check_drained(const struct slurm_options *o, const char *node,
                                       char *detail, size_t size)
{
    char state[256], reason[1024];
    if (slurm_read_node(o, node, state, sizeof(state), reason, sizeof(reason), detail, size))
        return strstr(detail, "timed out") ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_FAILED;
    if (!drained(state)) {
        snprintf(detail, size,
                 "node %s is no longer drained in Slurm (State=%s): someone resumed it, and it "
                 "may be running jobs",
                 node, state);
        return MEDIC_OUTCOME_REFUSED;
    }
    /* DRAINING: the drain is set but jobs still run (ALLOCATED or MIXED) */
    if (strstr(state, "ALLOC") || strstr(state, "MIXED") || strstr(state, "COMPLETING")) {
        snprintf(detail, size, "node %s still runs jobs (State=%s): the drain has not finished",
                 node, state);
        return MEDIC_OUTCOME_REFUSED;
    }
    snprintf(detail, size, "node %s is drained (State=%s)", node, state);
    return MEDIC_OUTCOME_SUCCEEDED;
}
