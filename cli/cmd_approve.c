/* SPDX-License-Identifier: Apache-2.0 */
/* The commands of a person in the loop, sent to the daemon's HTTP API with
 * a token (libcurl); the daemon records who sent them, from the token:
 * medic approve / medic deny answer a step waiting for approval (POST
 * /api/v1/approvals/ID), medic pause / medic unpause hold every disruptive
 * step fleet-wide (POST and DELETE /api/v1/pause), medic node release gives
 * a quarantined node back after its repair (POST
 * /api/v1/nodes/NODE/release). */
#include "buf.h"
#include "commands.h"
#include "options.h"
#include "timeutil.h"
#include "yaml_tree.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct cli_help help_approve = {
    "usage: medic approve ID [--reason TEXT] [--wait [--wait-limit D]] [--url URL]\n"
    "                        [--token-file FILE]\n"
    "       medic deny ID --reason TEXT [--undo] [--url URL] [--token-file FILE]\n"
    "\n"
    "Answers the step that decision ID left waiting for approval (verdict\n"
    "pending; the on-call page, GET /api/v1/approvals and `medic audit decisions\n"
    "--verdict pending` show the ids and the exact action). Approved, that\n"
    "action runs if every guard still holds now; a guard that clears by itself\n"
    "(a pause, a storm, the caps) holds it until it clears. Denied, it never\n"
    "runs, and a node medic holds drained or limited stays so for a person\n"
    "(quarantined until `medic node release`), unless --undo asks medic to give\n"
    "it back now. The daemon records who answered (the approver the token\n"
    "names in auth.approvers, or the admin credential), when and why, and\n"
    "prints what came of it: \"approved, drain queued\" when the action was\n"
    "handed to the executors. --wait then waits for its outcome (read with the\n"
    "same token from GET /api/v1/actions?decision=ID) and prints it.\n"
    "\n",
    "Exit status: 0 approved and run, or denied; 1 refused (not pending, expired,\n"
    "changed since it was offered, a guard says no, wrong credentials) or the\n"
    "daemon unreachable; 2 bad usage; 3 approved and held by a guard that clears\n"
    "by itself (it runs then, without asking again). With --wait: 0 the action\n"
    "succeeded, 1 it failed, was refused, timed out or was interrupted, 4 it had\n"
    "no outcome within --wait-limit.\n",
};

/* The options every command here shares, after its own. */
#define URL_OPTION(url)                                                                            \
    CLI_OPT_STRING("url", (url), "URL",                                                            \
                   "the daemon (default $MEDIC_URL, else http://127.0.0.1:9799)")
#define TOKEN_OPTION(token_file)                                                                   \
    CLI_OPT_STRING("token-file", (token_file), "FILE",                                             \
                   "the bearer token to send (an approver's, or the admin one); default "          \
                   "$MEDIC_TOKEN_FILE")

/* The daemon: $MEDIC_URL, else medic serve's default listen address. */
static const char *default_url(void)
{
    const char *url = getenv("MEDIC_URL");
    return url && url[0] ? url : "http://127.0.0.1:9799";
}

static size_t collect(char *data, size_t size, size_t n, void *arg)
{
    return medic_buf_append(arg, data, size * n) == 0 ? size * n : 0;
}

/* The token in token_file (NULL: $MEDIC_TOKEN_FILE; neither: none, *token
 * NULL). 0, or 1 with the error printed. */
static int read_token(const char *command, const char *token_file, char **token)
{
    *token = NULL;
    if (!token_file)
        token_file = getenv("MEDIC_TOKEN_FILE");
    if (!token_file)
        return 0;
    struct medic_error err = {0};
    size_t len = 0;
    if (medic_read_file(token_file, 4096, token, &len, &err)) {
        fprintf(stderr, "medic %s: %s\n", command, err.msg);
        return 1;
    }
    while (len && ((*token)[len - 1] == '\n' || (*token)[len - 1] == '\r'))
        (*token)[--len] = '\0';
    return 0;
}

static void forget_token(char *token)
{
    if (token)
        memset(token, 0, strlen(token));
    free(token);
}

/* One request to url's path: the HTTP status in *status and the answer in
 * got; the transport's error (CURLE_OK when it answered). */
static CURLcode http_call(const char *method, const char *url, const char *path, const char *body,
                          const char *token, long *status, struct medic_buf *got)
{
    struct medic_buf target, auth;
    medic_buf_init(&target, 0);
    medic_buf_init(&auth, 0);
    size_t base = strlen(url);
    while (base && url[base - 1] == '/')
        base--;
    medic_buf_printf(&target, "%.*s%s", (int)base, url, path);
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (token) {
        medic_buf_printf(&auth, "Authorization: Bearer %s", token);
        headers = curl_slist_append(headers, auth.data);
    }
    CURL *curl = curl_easy_init();
    CURLcode res = CURLE_FAILED_INIT;
    *status = 0;
    if (curl && headers && target.data) {
        curl_easy_setopt(curl, CURLOPT_URL, target.data);
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
        if (body)
            curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, got);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        res = curl_easy_perform(curl);
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    }
    curl_easy_cleanup(curl);
    curl_slist_free_all(headers);
    medic_buf_release(&target);
    if (auth.data)
        memset(auth.data, 0, auth.len);
    medic_buf_release(&auth);
    return res;
}

/* What medic said of an answer: the decision it led to and its action. */
struct taken {
    long long decision;
    char verdict[16], action[32];
};

/* Sends body (NULL: none) with method to url's path with the token, and
 * prints what medic answered (taken, when not NULL, gets the decision).
 * Returns the exit status: 0 when medic took it (200 or 202), 3 when an
 * approval was held by a guard. */
static int send_request(const char *command, const char *method, const char *url, const char *path,
                        const char *body, const char *token, struct taken *taken)
{
    struct medic_buf got;
    medic_buf_init(&got, 1 << 20);
    long status = 0;
    CURLcode res = http_call(method, url, path, body, token, &status, &got);
    int exit_code = 1;
    if (res != CURLE_OK) {
        fprintf(
            stderr,
            "medic %s: cannot reach medic at %s: %s (is medic serve listening there? --url names "
            "its listen address)\n",
            command, url, curl_easy_strerror(res));
    } else {
        cJSON *root = cJSON_ParseWithLength(got.data ? got.data : "", got.len);
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");
        const cJSON *result = cJSON_GetObjectItemCaseSensitive(data, "result");
        const cJSON *error = cJSON_GetObjectItemCaseSensitive(root, "error");
        const cJSON *decision = cJSON_GetObjectItemCaseSensitive(data, "decision");
        const cJSON *verdict = cJSON_GetObjectItemCaseSensitive(data, "verdict");
        const cJSON *action = cJSON_GetObjectItemCaseSensitive(data, "action");
        if (status == 200 || status == 202) {
            int id = cJSON_IsNumber(decision) && decision->valuedouble > 0;
            /* an approval that led to an action: it is queued, not done */
            int queued = taken && status == 200 && id && cJSON_IsString(verdict) &&
                         strcmp(verdict->valuestring, "execute") == 0 && cJSON_IsString(action) &&
                         action->valuestring[0];
            printf("%s", status == 202 ? "recorded; " : "");
            if (id)
                printf("decision %.0f: ", decision->valuedouble);
            if (queued)
                printf("approved, %s queued: ", action->valuestring);
            printf("%s\n", cJSON_IsString(result) ? result->valuestring : "(no result)");
            if (queued) {
                taken->decision = (long long)decision->valuedouble;
                snprintf(taken->verdict, sizeof(taken->verdict), "%s", verdict->valuestring);
                snprintf(taken->action, sizeof(taken->action), "%s", action->valuestring);
            }
            /* "suppressed: held: ...": approved, waiting for a guard */
            exit_code =
                cJSON_IsString(result) && strstr(result->valuestring, ": held: step ") ? 3 : 0;
        } else {
            fprintf(stderr, "medic %s: medic answered %ld: %s\n", command, status,
                    cJSON_IsString(error)    ? error->valuestring
                    : cJSON_IsString(result) ? result->valuestring
                                             : (got.data ? got.data : ""));
        }
        cJSON_Delete(root);
    }
    medic_buf_release(&got);
    return exit_code;
}

/* With --wait: reads the approved action's outcome (GET
 * /api/v1/actions?decision=ID) every second until it has one or limit
 * passes. 0 succeeded; 1 another outcome, or medic unreachable; 4 none in
 * time. */
static int wait_outcome(const char *command, const char *url, const char *token,
                        const struct taken *t, int64_t limit)
{
    char path[96];
    snprintf(path, sizeof(path), "/api/v1/actions?decision=%lld&limit=10", t->decision);
    int64_t start = medic_time_monotonic();
    for (;;) {
        struct medic_buf got;
        medic_buf_init(&got, 1 << 20);
        long status = 0;
        CURLcode res = http_call("GET", url, path, NULL, token, &status, &got);
        if (res != CURLE_OK || status != 200) {
            fprintf(stderr, "medic %s: cannot read the outcome of decision %lld (%s): %s\n",
                    command, t->decision, res != CURLE_OK ? curl_easy_strerror(res) : "HTTP error",
                    got.data ? got.data : "");
            medic_buf_release(&got);
            return 1;
        }
        cJSON *root = cJSON_ParseWithLength(got.data ? got.data : "", got.len), *row;
        int code = -1;
        cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(root, "data"))
        {
            const cJSON *phase = cJSON_GetObjectItemCaseSensitive(row, "phase");
            const cJSON *result = cJSON_GetObjectItemCaseSensitive(row, "result");
            const cJSON *detail = cJSON_GetObjectItemCaseSensitive(row, "detail");
            if (!cJSON_IsString(phase) || strcmp(phase->valuestring, "outcome") != 0 ||
                !cJSON_IsString(result))
                continue;
            printf("decision %lld: %s %s after %.1f s: %s\n", t->decision, t->action,
                   result->valuestring, (double)(medic_time_monotonic() - start) / 1e9,
                   cJSON_IsString(detail) ? detail->valuestring : "");
            code = strcmp(result->valuestring, "succeeded") == 0 ? 0 : 1;
        }
        cJSON_Delete(root);
        medic_buf_release(&got);
        if (code >= 0)
            return code;
        if (medic_time_monotonic() - start >= limit) {
            fprintf(stderr,
                    "medic %s: decision %lld's %s has no outcome after %lld s; it may still run: "
                    "medic audit actions --decision %lld\n",
                    command, t->decision, t->action, (long long)(limit / MEDIC_NS_PER_SEC),
                    t->decision);
            return 4;
        }
        struct timespec second = {1, 0};
        nanosleep(&second, NULL);
    }
}

/* POSTs {"approve": bool (approve 1 or 0; -1: none), "undo": true (when
 * undo), "reason": reason (when not NULL)} to path. */
static int post_body(const char *command, const char *url, const char *path, int approve, int undo,
                     const char *reason, const char *token_file, struct taken *taken)
{
    char *token = NULL;
    if (read_token(command, token_file, &token))
        return 1;
    cJSON *body = cJSON_CreateObject();
    if (approve >= 0)
        cJSON_AddBoolToObject(body, "approve", approve);
    if (undo)
        cJSON_AddTrueToObject(body, "undo");
    if (reason)
        cJSON_AddStringToObject(body, "reason", reason);
    char *json = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
    int rc = json ? send_request(command, "POST", url, path, json, token, taken) : 1;
    cJSON_free(json);
    forget_token(token);
    return rc;
}

static int answer(const char *command, int approve, int argc, char **argv)
{
    const char *reason = NULL, *url = default_url(), *token_file = NULL;
    int undo = 0, wait = 0;
    int64_t wait_limit = (int64_t)15 * 60 * MEDIC_NS_PER_SEC;
    const struct cli_option options[] = {
        CLI_OPT_STRING("reason", &reason, "TEXT", "why (required to deny; at most 500 bytes)"),
        CLI_OPT_FLAG("undo", &undo, "with deny: medic undoes what the incident holds now"),
        CLI_OPT_FLAG("wait", &wait, "with approve: wait for the action's outcome"),
        CLI_OPT_DURATION("wait-limit", &wait_limit, 1, "D", "how long --wait waits (default 15m)"),
        URL_OPTION(&url),
        TOKEN_OPTION(&token_file),
        CLI_OPT_END,
    };
    int rest = 0;
    int rc = cli_parse(command, &help_approve, argc, argv, 1, options, &rest);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (rest != argc - 1)
        return cli_usage_error(command, &help_approve, options,
                               "give the pending decision's ID, once");
    const char *id = argv[rest];
    if (strspn(id, "0123456789") != strlen(id) || !id[0]) {
        fprintf(stderr, "medic %s: ID is the pending decision's number, not '%s'\n", command, id);
        return 2;
    }
    if (!approve && (!reason || !reason[0])) {
        fprintf(stderr, "medic %s: a denial needs --reason: on-call reads it\n", command);
        return 2;
    }
    if (approve && undo) {
        fprintf(stderr, "medic %s: --undo goes with medic deny\n", command);
        return 2;
    }
    if (!approve && wait) {
        fprintf(stderr, "medic %s: --wait goes with medic approve\n", command);
        return 2;
    }
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/approvals/%s", id);
    struct taken taken = {0};
    rc = post_body(command, url, path, approve, undo, reason, token_file, &taken);
    if (rc != 0 || !wait || !taken.decision)
        return rc;
    char *token = NULL;
    if (read_token(command, token_file, &token))
        return 1;
    rc = wait_outcome(command, url, token, &taken, wait_limit);
    forget_token(token);
    return rc;
}

static const struct cli_help help_pause = {
    "usage: medic pause --reason TEXT [--until TIME] [--url URL] [--token-file FILE]\n"
    "       medic unpause [--url URL] [--token-file FILE]\n"
    "\n"
    "Holds every disruptive step fleet-wide (drain, power limit, power cycle)\n"
    "until unpaused, or until TIME (RFC 3339, or a duration from now: 2h), with\n"
    "the reason on-call and the audit log read (\"paused by WHO: TEXT\"). Resume\n"
    "and restore_power_limit of nodes medic disrupted still run, and an action\n"
    "under way finishes; held steps are decided again once the pause ends, while\n"
    "their alerts are fresh. The pause survives restarts and reaches every\n"
    "replica; /metrics (medic_paused) and the on-call page show it. Sent to the\n"
    "daemon's POST or DELETE /api/v1/pause with the token in --token-file\n"
    "(default $MEDIC_TOKEN_FILE): an approver's, or the admin one.\n"
    "\n",
    "Exit status: 0 taken; 1 refused (unpausing what is not paused, wrong\n"
    "credentials) or medic unreachable; 2 bad usage.\n",
};

static int pause_fleet(const char *command, int pause, int argc, char **argv)
{
    const char *reason = NULL, *until = NULL, *url = default_url(), *token_file = NULL;
    const struct cli_option options[] = {
        CLI_OPT_STRING("reason", &reason, "TEXT", "why (required to pause; at most 500 bytes)"),
        CLI_OPT_STRING("until", &until, "TIME", "when the pause ends by itself"),
        URL_OPTION(&url),
        TOKEN_OPTION(&token_file),
        CLI_OPT_END,
    };
    int rest = 0;
    int rc = cli_parse(command, &help_pause, argc, argv, 1, options, &rest);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (rest != argc)
        return cli_usage_error(command, &help_pause, options, "unexpected argument '%s'",
                               argv[rest]);
    if (pause && (!reason || !reason[0])) {
        fprintf(stderr, "medic %s: a pause needs --reason: on-call reads it\n", command);
        return 2;
    }
    if (!pause && until) {
        fprintf(stderr, "medic %s: --until goes with medic pause\n", command);
        return 2;
    }
    char *json = NULL;
    if (pause) {
        cJSON *body = cJSON_CreateObject();
        cJSON_AddStringToObject(body, "reason", reason);
        if (until)
            cJSON_AddStringToObject(body, "until", until);
        json = cJSON_PrintUnformatted(body);
        cJSON_Delete(body);
        if (!json)
            return 1;
    }
    char *token = NULL;
    rc = read_token(command, token_file, &token)
             ? 1
             : send_request(command, pause ? "POST" : "DELETE", url, "/api/v1/pause", json, token,
                            NULL);
    cJSON_free(json);
    forget_token(token);
    return rc;
}

int medic_cmd_pause(int argc, char **argv)
{
    return pause_fleet("pause", 1, argc, argv);
}

int medic_cmd_unpause(int argc, char **argv)
{
    return pause_fleet("unpause", 0, argc, argv);
}

int medic_cmd_approve(int argc, char **argv)
{
    return answer("approve", 1, argc, argv);
}

int medic_cmd_deny(int argc, char **argv)
{
    return answer("deny", 0, argc, argv);
}

static const struct cli_help help_node = {
    "usage: medic node release NODE --reason TEXT [--url URL] [--token-file FILE]\n"
    "\n"
    "Gives a quarantined node back after a person repaired it. A node is\n"
    "quarantined when it failed its health check (verify), when its incidents\n"
    "reached safety.quarantine (a repeat offender), or when a policy drained it\n"
    "and does not resume it (held for a person); medic keeps it as it is and takes\n"
    "no disruptive action on it until it is released. The release undoes what\n"
    "medic holds there (resume of its drain, restore of its power limits) and\n"
    "ends its quarantined incidents as released, with who and why in the audit\n"
    "log. `medic audit quarantined` lists the quarantined nodes. Sent to the\n"
    "daemon's POST /api/v1/nodes/NODE/release with the token in --token-file\n"
    "(default $MEDIC_TOKEN_FILE): an approver's, or the admin one.\n"
    "\n",
    "Exit status: 0 released; 1 refused (the node is not quarantined, wrong\n"
    "credentials) or medic unreachable; 2 bad usage.\n",
};

int medic_cmd_node(int argc, char **argv)
{
    const char *command = "node release";
    const char *reason = NULL, *url = default_url(), *token_file = NULL;
    const struct cli_option options[] = {
        CLI_OPT_STRING("reason", &reason, "TEXT",
                       "what was repaired (required; at most 500 bytes)"),
        URL_OPTION(&url),
        TOKEN_OPTION(&token_file),
        CLI_OPT_END,
    };
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        cli_usage(stdout, &help_node, options);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "release") != 0)
        return cli_usage_error("node", &help_node, options, "expected release");
    int rest = 0;
    int rc = cli_parse(command, &help_node, argc - 1, argv + 1, 1, options, &rest);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (rest != argc - 2)
        return cli_usage_error(command, &help_node, options,
                               "give the node's inventory name, once");
    const char *node = argv[1 + rest];
    if (!reason || !reason[0]) {
        fprintf(stderr, "medic %s: a release needs --reason: what was repaired\n", command);
        return 2;
    }
    if (!node[0] || strlen(node) > 120 ||
        strspn(node, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:") !=
            strlen(node)) {
        fprintf(stderr, "medic %s: '%s' is not an inventory node name\n", command, node);
        return 2;
    }
    char path[200];
    snprintf(path, sizeof(path), "/api/v1/nodes/%s/release", node);
    return post_body(command, url, path, -1, 0, reason, token_file, NULL);
}
