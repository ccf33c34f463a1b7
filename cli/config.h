/* medic's configuration file (YAML): parsed into a fresh struct and
 * validated all-or-nothing; errors are "FILE:LINE:COL: message". Secrets
 * named by *_file keys are read at load time, so a reload re-reads them. */
#ifndef MEDIC_CONFIG_H
#define MEDIC_CONFIG_H

#include "error.h"
#include "payload.h"

#include <stddef.h>
#include <stdint.h>

enum medic_mode { MEDIC_MODE_DRY_RUN, MEDIC_MODE_LIVE };

/* Credentials for one class of endpoints; empty when not configured. */
struct medic_credentials {
    char *bearer_token;
    char *basic_username;
    char *basic_password;
};

#define MEDIC_MAX_NODE_LABELS 16

struct medic_config {
    char *source; /* the file, or "(built-in defaults)" */
    char *listen; /* host:port */
    enum medic_mode mode;
    char *audit_path;
    int64_t audit_busy_timeout; /* ns */
    size_t audit_max_pending;
    struct medic_credentials webhook_auth;
    struct medic_credentials read_auth;
    struct medic_credentials admin_auth;
    char *tls_cert_pem;
    char *tls_key_pem;
    struct receiver_limits limits;
    size_t max_connections;
    char *node_labels[MEDIC_MAX_NODE_LABELS];
    size_t node_label_count;
    int log_level;
    char hash[65]; /* SHA-256 of the file's bytes ("" for the defaults) */
};

/* Fills config with the embedded defaults: listen 127.0.0.1:9799, audit
 * ./medic.db, mode dry-run, node labels node, Hostname, instance. */
int medic_config_defaults(struct medic_config *config);

/* Loads path into config (a fresh struct). On error config is released
 * and err holds "FILE:LINE:COL: message". */
int medic_config_load(const char *path, struct medic_config *config, struct medic_error *err);

void medic_config_release(struct medic_config *config);

#endif
