/* medic approve / medic deny: a person's answer to a step waiting for
 * approval, sent to the daemon's POST /api/v1/approvals/ID with a token
 * (libcurl); the daemon records who answered, from the token. */
#include "buf.h"
#include "commands.h"
#include "options.h"
#include "yaml_tree.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_approve[] =
    "usage: medic approve ID [--reason TEXT] [--url URL] [--token-file FILE]\n"
    "       medic deny ID --reason TEXT [--url URL] [--token-file FILE]\n"
    "\n"
    "Answers the step that decision ID left waiting for approval (verdict\n"
    "pending; the on-call page and `medic audit decisions --verdict pending`\n"
    "show the ids). Approved, the step runs if every guard still holds now;\n"
    "denied, it never runs. The daemon records who answered (the approver the\n"
    "token names in auth.approvers, or the admin credential), when and why,\n"
    "and prints what came of it.\n"
    "\n"
    "  --reason TEXT      why (required to deny; at most 500 bytes)\n"
    "  --url URL          the daemon (default http://127.0.0.1:9799)\n"
    "  --token-file FILE  the bearer token to send (an approver's, or the admin\n"
    "                     one); default $MEDIC_TOKEN_FILE\n"
    "\n"
    "Exit status: 0 approved and run, or denied; 1 refused (not pending, expired,\n"
    "a guard says no, wrong credentials) or the daemon unreachable; 2 bad usage.\n";

static size_t collect(char *data, size_t size, size_t n, void *arg)
{
    return medic_buf_append(arg, data, size * n) == 0 ? size * n : 0;
}

static int answer(const char *command, int approve, int argc, char **argv)
{
    const char *reason = NULL, *url = "http://127.0.0.1:9799", *token_file = NULL;
    const struct cli_option options[] = {CLI_OPT_STRING("reason", &reason),
                                         CLI_OPT_STRING("url", &url),
                                         CLI_OPT_STRING("token-file", &token_file), CLI_OPT_END};
    int rest = 0;
    int rc = cli_parse(command, usage_approve, argc, argv, 1, options, &rest);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (rest != argc - 1) {
        fprintf(stderr, "%s: give the pending decision's ID, once\n\n%s", command, usage_approve);
        return 2;
    }
    const char *id = argv[rest];
    if (strspn(id, "0123456789") != strlen(id) || !id[0]) {
        fprintf(stderr, "%s: ID is the pending decision's number, not '%s'\n", command, id);
        return 2;
    }
    if (!approve && (!reason || !reason[0])) {
        fprintf(stderr, "%s: a denial needs --reason: on-call reads it\n", command);
        return 2;
    }
    if (!token_file)
        token_file = getenv("MEDIC_TOKEN_FILE");
    char *token = NULL;
    if (token_file) {
        struct medic_error err = {0};
        size_t len = 0;
        if (medic_read_file(token_file, 4096, &token, &len, &err)) {
            fprintf(stderr, "%s: %s\n", command, err.msg);
            return 1;
        }
        while (len && (token[len - 1] == '\n' || token[len - 1] == '\r'))
            token[--len] = '\0';
    }
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "decision", approve ? "approve" : "deny");
    if (reason)
        cJSON_AddStringToObject(body, "reason", reason);
    char *json = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
    struct medic_buf target, auth, got;
    medic_buf_init(&target, 0);
    medic_buf_init(&auth, 0);
    medic_buf_init(&got, 1 << 20);
    size_t base = strlen(url);
    while (base && url[base - 1] == '/')
        base--;
    medic_buf_printf(&target, "%.*s/api/v1/approvals/%s", (int)base, url, id);
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (token) {
        medic_buf_printf(&auth, "Authorization: Bearer %s", token);
        headers = curl_slist_append(headers, auth.data);
    }
    CURL *curl = curl_easy_init();
    long status = 0;
    CURLcode res = CURLE_FAILED_INIT;
    if (curl && json && headers) {
        curl_easy_setopt(curl, CURLOPT_URL, target.data);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, json);
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &got);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        res = curl_easy_perform(curl);
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    }
    int exit_code = 1;
    if (res != CURLE_OK) {
        fprintf(stderr, "%s: cannot reach medic at %s: %s\n", command, url,
                curl_easy_strerror(res));
    } else {
        cJSON *root = cJSON_ParseWithLength(got.data ? got.data : "", got.len);
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");
        const cJSON *result = cJSON_GetObjectItemCaseSensitive(data, "result");
        const cJSON *error = cJSON_GetObjectItemCaseSensitive(root, "error");
        const cJSON *decision = cJSON_GetObjectItemCaseSensitive(data, "decision");
        if (status == 200 || status == 202) {
            printf("%s", status == 202 ? "recorded; " : "");
            if (cJSON_IsNumber(decision) && decision->valuedouble > 0)
                printf("decision %.0f: ", decision->valuedouble);
            printf("%s\n", cJSON_IsString(result) ? result->valuestring : "(no result)");
            exit_code = 0;
        } else {
            fprintf(stderr, "%s: medic answered %ld: %s\n", command, status,
                    cJSON_IsString(error)    ? error->valuestring
                    : cJSON_IsString(result) ? result->valuestring
                                             : (got.data ? got.data : ""));
        }
        cJSON_Delete(root);
    }
    curl_easy_cleanup(curl);
    curl_slist_free_all(headers);
    cJSON_free(json);
    if (token)
        memset(token, 0, strlen(token));
    free(token);
    medic_buf_release(&target);
    if (auth.data)
        memset(auth.data, 0, auth.len);
    medic_buf_release(&auth);
    medic_buf_release(&got);
    return exit_code;
}

int medic_cmd_approve(int argc, char **argv)
{
    return answer("medic approve", 1, argc, argv);
}

int medic_cmd_deny(int argc, char **argv)
{
    return answer("medic deny", 0, argc, argv);
}
