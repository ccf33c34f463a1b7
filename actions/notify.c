/* SPDX-License-Identifier: Apache-2.0 */
#include "notify.h"
#include "buf.h"
#include "timeutil.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef MEDIC_VERSION
#define MEDIC_VERSION "0"
#endif

void notify_options_default(struct notify_options *o)
{
    o->timeout_ms = 5000;
    o->attempts = 3;
    o->backoff_ms = 500;
}

void notify_global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void json_field(struct medic_buf *b, const char *key, const char *value, int comma)
{
    if (comma)
        medic_buf_puts(b, ",");
    medic_buf_json_string(b, key);
    medic_buf_puts(b, ":");
    medic_buf_json_string(b, value ? value : "");
}

static const char *summary(const struct notify_message *m, char *buf, size_t size)
{
    if (m->text && *m->text)
        return m->text;
    snprintf(buf, size, "medic: %s on %s (policy %s): %s", m->alertname ? m->alertname : "alert",
             m->node ? m->node : "?", m->policy ? m->policy : "-", m->reason ? m->reason : "");
    return buf;
}

static void build_body(const struct notify_target *t, const struct notify_message *m,
                       struct medic_buf *b)
{
    char text[1024], when[40], id[32];
    const char *s = summary(m, text, sizeof(text));
    medic_time_format(m->time, when, sizeof(when));
    snprintf(id, sizeof(id), "%lld", (long long)m->decision_id);
    switch (t->kind) {
    case NOTIFY_SLACK:
        medic_buf_puts(b, "{");
        json_field(b, "text", s, 0);
        medic_buf_puts(b, "}");
        break;
    case NOTIFY_PAGERDUTY: {
        char dedup[48], cut[1025];
        snprintf(dedup, sizeof(dedup), "medic-decision-%s", id);
        snprintf(cut, sizeof(cut), "%s", s); /* PagerDuty caps summaries at 1024 */
        medic_buf_puts(b, "{");
        json_field(b, "routing_key", t->routing_key, 0);
        json_field(b, "event_action", "trigger", 1);
        json_field(b, "dedup_key", dedup, 1);
        medic_buf_puts(b, ",\"payload\":{");
        json_field(b, "summary", cut, 0);
        json_field(b, "source", m->node && *m->node ? m->node : "medic", 1);
        json_field(b, "severity", "critical", 1);
        json_field(b, "timestamp", when, 1);
        json_field(b, "component", m->alertname, 1);
        json_field(b, "group", m->policy, 1);
        medic_buf_puts(b, ",\"custom_details\":{");
        json_field(b, "decision_id", id, 0);
        json_field(b, "reason", m->reason, 1);
        medic_buf_puts(b, "}}}");
        break;
    }
    default:
        medic_buf_printf(b, "{\"decision_id\":%lld", (long long)m->decision_id);
        json_field(b, "time", when, 1);
        json_field(b, "node", m->node, 1);
        json_field(b, "alertname", m->alertname, 1);
        json_field(b, "policy", m->policy, 1);
        json_field(b, "reason", m->reason, 1);
        json_field(b, "message", s, 1);
        json_field(b, "sender", "medic " MEDIC_VERSION, 1);
        medic_buf_puts(b, "}");
    }
}

/* A header value cannot hold line breaks (no header injection from labels). */
static void header_value(char *out, size_t size, const char *in)
{
    size_t n = 0;
    for (; in && *in && n + 1 < size; in++)
        out[n++] = (*in == '\r' || *in == '\n') ? ' ' : *in;
    out[n] = '\0';
}

static void build_mail(const struct notify_target *t, const struct notify_message *m,
                       struct medic_buf *b)
{
    char text[1024], subject[300], date[64], from[256];
    const char *s = summary(m, text, sizeof(text));
    time_t now = (time_t)(m->time / MEDIC_NS_PER_SEC);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S +0000", &tm);
    header_value(subject, sizeof(subject), s);
    if (strlen(subject) > 200)
        strcpy(subject + 197, "...");
    header_value(from, sizeof(from), t->from);
    medic_buf_printf(b, "Date: %s\r\nFrom: %s\r\nTo: ", date, from);
    for (size_t i = 0; i < t->to_count; i++) {
        char to[256];
        header_value(to, sizeof(to), t->to[i]);
        medic_buf_printf(b, "%s%s", i ? ", " : "", to);
    }
    medic_buf_printf(b,
                     "\r\nSubject: %s\r\nMessage-ID: <medic-decision-%lld-%lld@medic>\r\n"
                     "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Transfer-Encoding: 8bit\r\n\r\n",
                     subject, (long long)m->decision_id, (long long)now);
    /* the body with CRLF line ends */
    for (const char *p = s; *p; p++) {
        if (*p == '\n' && (p == s || p[-1] != '\r'))
            medic_buf_puts(b, "\r\n");
        else
            medic_buf_append(b, p, 1);
    }
    medic_buf_printf(b,
                     "\r\n\r\nnode: %s\r\nalert: %s\r\npolicy: %s\r\nreason: %s\r\n"
                     "decision: %lld\r\n",
                     m->node ? m->node : "", m->alertname ? m->alertname : "",
                     m->policy ? m->policy : "", m->reason ? m->reason : "",
                     (long long)m->decision_id);
}

struct upload {
    const char *data;
    size_t len, pos;
};

static size_t read_upload(char *buf, size_t size, size_t n, void *arg)
{
    struct upload *u = arg;
    size_t room = size * n, left = u->len - u->pos;
    size_t k = left < room ? left : room;
    memcpy(buf, u->data + u->pos, k);
    u->pos += k;
    return k;
}

static size_t discard(char *buf, size_t size, size_t n, void *arg)
{
    (void)buf;
    (void)arg;
    return size * n;
}

/* One attempt; returns 0, 1 for a transient failure, -1 for a permanent one;
 * *timed_out says whether the server did not answer in time. */
static int attempt(const struct notify_target *t, const struct medic_buf *body, long timeout_ms,
                   char *why, size_t size, int *timed_out)
{
    *timed_out = 0;
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(why, size, "cannot create a curl handle");
        return 1;
    }
    struct curl_slist *headers = NULL, *rcpt = NULL;
    struct upload up = {body->data, body->len, 0};
    char auth[600];
    curl_easy_setopt(c, CURLOPT_URL, t->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    if (t->kind == NOTIFY_SMTP) {
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
        curl_easy_setopt(c, CURLOPT_MAIL_FROM, t->from);
        for (size_t i = 0; i < t->to_count; i++)
            rcpt = curl_slist_append(rcpt, t->to[i]);
        curl_easy_setopt(c, CURLOPT_MAIL_RCPT, rcpt);
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, read_upload);
        curl_easy_setopt(c, CURLOPT_READDATA, &up);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)body->len);
        if (t->username && t->password) {
            curl_easy_setopt(c, CURLOPT_USERNAME, t->username);
            curl_easy_setopt(c, CURLOPT_PASSWORD, t->password);
        }
    } else {
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        headers = curl_slist_append(headers, "Content-Type: application/json");
        headers = curl_slist_append(headers, "User-Agent: medic/" MEDIC_VERSION);
        if (t->token) {
            snprintf(auth, sizeof(auth), "Authorization: Bearer %.512s", t->token);
            headers = curl_slist_append(headers, auth);
        } else if (t->username && t->password) {
            curl_easy_setopt(c, CURLOPT_USERNAME, t->username);
            curl_easy_setopt(c, CURLOPT_PASSWORD, t->password);
        }
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)body->len);
    }
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(headers);
    curl_slist_free_all(rcpt);
    curl_easy_cleanup(c);
    if (rc == CURLE_OK && (t->kind == NOTIFY_SMTP || (code >= 200 && code < 300)))
        return 0;
    if (rc != CURLE_OK) {
        *timed_out = rc == CURLE_OPERATION_TIMEDOUT;
        /* the URL is not secret, but a userinfo part could be: say the host only */
        snprintf(why, size, "%s%s", curl_easy_strerror(rc),
                 code ? (code >= 500 ? " (server error)" : " (refused)") : "");
        if (t->kind == NOTIFY_SMTP && code)
            snprintf(why + strlen(why), size - strlen(why), ": SMTP %ld", code);
        if (t->kind == NOTIFY_SMTP)
            return code >= 400 && code < 500 ? 1 : (code >= 500 ? -1 : 1);
        return rc == CURLE_URL_MALFORMAT || rc == CURLE_UNSUPPORTED_PROTOCOL ? -1 : 1;
    }
    snprintf(why, size, "HTTP %ld", code);
    return code >= 500 || code == 429 || code == 408 ? 1 : -1;
}

enum medic_outcome notify_send(const struct notify_target *t, const struct notify_message *m,
                               const struct notify_options *o, struct medic_error *err)
{
    struct notify_options defaults;
    if (!o) {
        notify_options_default(&defaults);
        o = &defaults;
    }
    if (t->kind == NOTIFY_PAGERDUTY && (!t->routing_key || !*t->routing_key)) {
        medic_error_set(err, MEDIC_E_INVALID, "pagerduty needs a routing_key");
        return MEDIC_OUTCOME_REFUSED;
    }
    if (t->kind == NOTIFY_SMTP && (!t->from || !t->to_count)) {
        medic_error_set(err, MEDIC_E_INVALID, "smtp needs from and to");
        return MEDIC_OUTCOME_REFUSED;
    }
    struct medic_buf body;
    medic_buf_init(&body, (size_t)1 << 20);
    if (t->kind == NOTIFY_SMTP)
        build_mail(t, m, &body);
    else
        build_body(t, m, &body);
    if (body.error) { /* never send half a message */
        int code = body.error;
        medic_buf_release(&body);
        medic_error_set(err, code, "the message does not fit in %d bytes", 1 << 20);
        return MEDIC_OUTCOME_REFUSED;
    }
    char why[256] = "";
    long delay = o->backoff_ms;
    int rc = 1, tries = 0, timed_out = 0;
    while (rc > 0 && tries < o->attempts) {
        if (tries++) {
            usleep((useconds_t)delay * 1000);
            delay *= 2;
        }
        rc = attempt(t, &body, o->timeout_ms, why, sizeof(why), &timed_out);
    }
    medic_buf_release(&body);
    if (rc == 0)
        return MEDIC_OUTCOME_SUCCEEDED;
    medic_error_set(err, MEDIC_E_IO, "%s after %d attempt%s", why, tries, tries == 1 ? "" : "s");
    return timed_out ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_FAILED;
}
