/* SPDX-License-Identifier: Apache-2.0 */
#include "agent.h"
#include "commands.h"
#include "options.h"
#include "log.h"
#include "yaml_tree.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* SIGTERM and SIGINT reach a handler, installed once NVML is loaded, that
 * writes to this pipe: whichever thread the kernel hands the signal to (NVML
 * runs threads of its own), the agent stops cleanly. Once, on an H100, an
 * agent that blocked the signals and waited in sigwait() was killed by a
 * SIGTERM instead. */
static int stop_pipe[2] = {-1, -1};

static void on_stop_signal(int sig)
{
    unsigned char b = (unsigned char)sig;
    ssize_t w = write(stop_pipe[1], &b, 1);
    (void)w;
}

static int catch_stop_signals(void)
{
    if (pipe(stop_pipe))
        return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGTERM, &sa, NULL) || sigaction(SIGINT, &sa, NULL))
        return -1;
    return 0;
}

static int wait_for_stop_signal(void)
{
    for (;;) {
        unsigned char b = 0;
        ssize_t r = read(stop_pipe[0], &b, 1);
        if (r == 1)
            return b;
        if (r < 0 && errno == EINTR)
            continue;
        return SIGTERM; /* the pipe broke: stop rather than spin */
    }
}

static const struct cli_help help = {
    "usage: medic agent --token-file FILE [--listen ADDR:PORT] [--state FILE]\n"
    "                   [--nvml LIBRARY] [--nvidia-smi PROGRAM]\n"
    "                   [--tls-cert FILE --tls-key FILE]\n"
    "\n"
    "The node agent for GPU power limits, health and resets: run one on each GPU\n"
    "node. medic serve calls it for power_limit, restore_power_limit and\n"
    "gpu_reset, and to verify a node before it returns (the inventory's agent.url).\n"
    "\n"
    "  GET  /v1/gpus                    index, UUID, name, current/min/max/default\n"
    "                                   limit and draw of every GPU (watts)\n"
    "  GET  /v1/health                  what the driver says of every GPU:\n"
    "                                   recovery action, remapped rows, volatile\n"
    "                                   DBE, persistence mode, compute processes\n"
    "                                   (null: not offered)\n"
    "  POST /v1/gpus/N/power-limit      {\"watts\": W}: set GPU N's limit, within its\n"
    "                                   bounds; the limit it replaces is remembered\n"
    "  POST /v1/restore                 put every remembered limit back\n"
    "  POST /v1/gpus/N/reset            {\"uuid\": U, \"check_only\": B}: reset GPU N\n"
    "                                   (refused while compute processes run on\n"
    "                                   it, or when N is no longer U); persistence\n"
    "                                   mode off first and back on after;\n"
    "                                   confirmed back\n"
    "  GET  /-/healthy\n"
    "\n"
    "Every /v1 request needs `Authorization: Bearer TOKEN` (the token file's\n"
    "content; mode 0600 or 0400). NVML is loaded at start with dlopen\n"
    "(libnvidia-ml.so.1, or --nvml); remembered limits live in --state (default\n"
    "./medic-agent.state) so a restore works after the agent restarts.\n"
    "\n",
    NULL,
};

static char *read_secret_file(const char *path, const char *what)
{
    struct stat st;
    char *data = NULL;
    size_t len;
    struct medic_error err = {0};
    if (stat(path, &st) != 0 || (st.st_mode & 077)) {
        fprintf(stderr, "medic agent: %s '%s' is missing or readable by others (chmod 600)\n", what,
                path);
        return NULL;
    }
    if (medic_read_file(path, 65536, &data, &len, &err)) {
        fprintf(stderr, "medic agent: %s\n", err.msg);
        return NULL;
    }
    while (len && (data[len - 1] == '\n' || data[len - 1] == '\r'))
        data[--len] = '\0';
    return data;
}

int medic_cmd_agent(int argc, char **argv)
{
    struct agent_options o = {.listen = "0.0.0.0:" MEDIC_AGENT_PORT,
                              .state_file = "./medic-agent.state"};
    const char *token_file = NULL, *cert_file = NULL, *key_file = NULL;
    const struct cli_option options[] = {
        CLI_OPT_STRING("listen", &o.listen, "ADDR:PORT", "default 0.0.0.0:" MEDIC_AGENT_PORT),
        CLI_OPT_STRING("token-file", &token_file, "FILE", "the bearer token (required)"),
        CLI_OPT_STRING("state", &o.state_file, "FILE", "remembered limits"),
        CLI_OPT_STRING("nvml", &o.nvml_library, "LIBRARY", "the NVML library to load"),
        CLI_OPT_STRING("nvidia-smi", &o.nvidia_smi, "PROGRAM",
                       "run for a GPU reset, as PROGRAM --gpu-reset -i UUID (no shell; "
                       "default nvidia-smi from PATH)"),
        CLI_OPT_STRING("tls-cert", &cert_file, "FILE", "serve HTTPS with this certificate"),
        CLI_OPT_STRING("tls-key", &key_file, "FILE", "and this key"),
        CLI_OPT_END,
    };
    int rest, parsed = cli_parse("agent", &help, argc, argv, 1, options, &rest);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    if (!token_file || rest != argc || (!cert_file != !key_file))
        return cli_usage_error("agent", &help, options,
                               !token_file               ? "--token-file is required"
                               : !cert_file != !key_file ? "--tls-cert and --tls-key go together"
                                                         : "unexpected argument");
    char *token = read_secret_file(token_file, "token file");
    char *cert = NULL, *key = NULL;
    size_t len;
    struct medic_error err = {0};
    if (!token)
        return 1;
    if (cert_file && (medic_read_file(cert_file, 256 * 1024, &cert, &len, &err) ||
                      !(key = read_secret_file(key_file, "TLS key")))) {
        fprintf(stderr, "medic agent: %s\n", err.msg[0] ? err.msg : "cannot read the TLS files");
        free(token);
        free(cert);
        return 1;
    }
    o.token = token;
    o.tls_cert_pem = cert;
    o.tls_key_pem = key;
    signal(SIGPIPE, SIG_IGN);
    struct agent *a = NULL;
    int status = 0;
    if (agent_start(&o, &a, &err)) {
        medic_log_error("cannot start the agent", "error", err.msg, NULL);
        status = 1;
    } else if (catch_stop_signals()) {
        medic_log_error("cannot install the signal handlers", "error", strerror(errno), NULL);
        agent_stop(a);
        status = 1;
    } else {
        char port[16];
        snprintf(port, sizeof(port), "%d", agent_port(a));
        medic_log_info("medic agent started", "listen", o.listen, "port", port, "tls",
                       cert ? "on" : "off", NULL);
        int sig = wait_for_stop_signal();
        medic_log_info("medic agent stopping", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                       NULL);
        agent_stop(a);
    }
    memset(token, 0, strlen(token));
    free(token);
    free(cert);
    free(key);
    return status;
}
