/* SPDX-License-Identifier: Apache-2.0 */
/* Parsing of Alertmanager webhook v4 notifications into plain structs.
 * Every input is capped; every rejection says what and where. */
#ifndef MEDIC_RECEIVER_PAYLOAD_H
#define MEDIC_RECEIVER_PAYLOAD_H

#include "alert.h"
#include "error.h"

#include <stddef.h>

struct receiver_limits {
    size_t max_body_bytes; /* checked by the HTTP layer: 413 */
    size_t max_alerts;     /* alerts in one notification */
    size_t max_labels;     /* labels (or annotations) in one set */
    size_t max_label_name_bytes;
    size_t max_label_value_bytes;
    size_t max_annotation_value_bytes;
    size_t max_string_bytes; /* groupKey, URLs, fingerprint, receiver */
    int max_depth;           /* JSON nesting */
};

/* The defaults: 1 MiB body, 1000 alerts, 64 labels, names 256 bytes,
 * label values 4 KiB, annotation values 16 KiB, other strings 8 KiB,
 * nesting 64. */
void receiver_limits_default(struct receiver_limits *limits);

/* The widest limits a configuration may set; a stored notification is
 * parsed again under these, since it was accepted under the limits of its
 * day (which a reload may since have narrowed). */
#define RECEIVER_WIDEST_BODY_BYTES ((size_t)64 << 20)
#define RECEIVER_WIDEST_ALERTS 100000
#define RECEIVER_WIDEST_LABELS 1024
#define RECEIVER_WIDEST_VALUE_BYTES ((size_t)1 << 20)
void receiver_limits_widest(struct receiver_limits *limits);

/* Parses body (len bytes, not necessarily NUL-terminated) into out, which
 * must be initialised with medic_notification_init(); out owns everything
 * it points to. On failure returns MEDIC_E_INVALID or MEDIC_E_LIMIT with a
 * message in err, and out holds nothing useful. Unknown fields are ignored;
 * wrong types, invalid UTF-8, deep nesting and over-limit input are errors.
 * A missing fingerprint is computed from the labels as Prometheus does. */
int receiver_payload_parse(const char *body, size_t len, const struct receiver_limits *limits,
                           struct medic_notification *out, struct medic_error *err);

#endif
