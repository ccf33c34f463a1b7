/* SPDX-License-Identifier: Apache-2.0 */
/* Plain data that crosses module boundaries: an Alertmanager notification
 * and its alerts, as parsed by the receiver and stored by the audit log.
 * Every string and array lives in the notification's arena. */
#ifndef MEDIC_ALERT_H
#define MEDIC_ALERT_H

#include "arena.h"

#include <stddef.h>
#include <stdint.h>

enum medic_alert_status { MEDIC_STATUS_FIRING, MEDIC_STATUS_RESOLVED };

struct medic_label {
    const char *name;
    const char *value;
};

/* A label set sorted by name, names unique. */
struct medic_labels {
    struct medic_label *items;
    size_t count;
};

struct medic_alert {
    enum medic_alert_status status;
    struct medic_labels labels;
    struct medic_labels annotations;
    int64_t starts_at; /* ns since epoch, or MEDIC_TIME_UNSET */
    int64_t ends_at;
    const char *generator_url;
    const char *fingerprint;
};

struct medic_notification {
    struct medic_arena arena;
    const char *version;
    const char *group_key;
    int64_t truncated_alerts;
    enum medic_alert_status status;
    const char *receiver;
    struct medic_labels group_labels;
    struct medic_labels common_labels;
    struct medic_labels common_annotations;
    const char *external_url;
    struct medic_alert *alerts;
    size_t alert_count;
};

void medic_notification_init(struct medic_notification *n);
void medic_notification_release(struct medic_notification *n);
/* A deep copy of from into out (initialised here) with its own arena.
 * Returns 0 or MEDIC_E_NOMEM (out is then empty). */
int medic_notification_copy(const struct medic_notification *from, struct medic_notification *out);

/* Returns the value of label name, or NULL. */
const char *medic_labels_get(const struct medic_labels *labels, const char *name);

/* Prometheus' fingerprint of a label set (FNV-1a 64 over name 0xff value
 * 0xff in name order), as 16 hex digits and a NUL. */
void medic_labels_fingerprint(const struct medic_labels *labels, char out[17]);

/* A GPU index as dcgm-exporter's `gpu` label gives it: 0 to 255 in
 * decimal, nothing else; -1 for NULL or any other text. */
int medic_gpu_index(const char *text);

/* "firing" or "resolved". */
const char *medic_alert_status_name(enum medic_alert_status status);

/* The node an alert is about: the first of label_names present, with a
 * trailing :port (or the brackets of [v6]:port) removed, written into out.
 * Returns 0, MEDIC_E_NOTFOUND when no label is present, or MEDIC_E_LIMIT
 * (below). out_size is at least MEDIC_NODE_NAME_MAX + 1. */
int medic_alert_node(const struct medic_labels *labels, const char *const *label_names,
                     size_t label_count, char *out, size_t out_size);
/* The longest node name or alias, in bytes: the inventory refuses longer
 * ones, and an alert whose node label is longer (port stripped) names no
 * node: medic_alert_node returns MEDIC_E_LIMIT, with out holding the
 * label's start and MEDIC_NODE_NAME_CUT, for the decision to say so. */
#define MEDIC_NODE_NAME_MAX 127
#define MEDIC_NODE_NAME_CUT " [cut: over 127 bytes, no node has such a name]"

/* The identity used to recognise a repeated notification: SHA-256 over the
 * group key and, for every alert in fingerprint order, its fingerprint,
 * status, startsAt and endsAt. Receiver, externalURL and annotations do not
 * count, so HA replicas' copies match. Writes 64 hex digits and a NUL. */
void medic_notification_dedupe_key(const struct medic_notification *n, char out[65]);

/* A risk (0..1) as people read it: two decimals ("0.42"), or two
 * significant digits below 0.01 ("0.0031"), since a calibrated risk is
 * small for most GPUs and "0.00" would hide how small. */
void medic_risk_format(double risk, char *out, size_t size);

#endif
