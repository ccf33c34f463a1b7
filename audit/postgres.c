#include "postgres.h"
#include "chain.h"
#include "schema.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const audit_pg_tables[AUDIT_PG_TABLES] = {
    "notifications", "alerts",           "decisions",  "actions",
    "engine_state",  "incident_changes", "engine_rows"};

/* The SQLite schema at its newest version (schema.c), in PostgreSQL's
 * types: INTEGER is bigint, REAL double precision, BLOB bytea. Kept in step
 * with schema.c: the version in medic_schema is the same number. */
static const char pg_schema[] =
    "CREATE TABLE notifications ("
    "  id BIGINT PRIMARY KEY,"
    "  received_at BIGINT NOT NULL,"
    "  group_key TEXT NOT NULL,"
    "  status TEXT NOT NULL CHECK (status IN ('firing','resolved')),"
    "  receiver TEXT,"
    "  external_url TEXT,"
    "  truncated_alerts BIGINT NOT NULL DEFAULT 0,"
    "  alert_count BIGINT NOT NULL,"
    "  dedupe_key TEXT NOT NULL,"
    "  dedupe_prefix BIGINT NOT NULL,"
    "  duplicate_of BIGINT REFERENCES notifications(id),"
    "  remote_addr TEXT,"
    "  payload BYTEA NOT NULL,"
    "  payload_encoding TEXT NOT NULL CHECK (payload_encoding IN ('identity','deflate')),"
    "  payload_bytes BIGINT NOT NULL,"
    "  evaluated_at BIGINT);"
    "CREATE INDEX notifications_first_by_dedupe_prefix ON notifications(dedupe_prefix)"
    "  WHERE duplicate_of IS NULL;"
    "CREATE INDEX notifications_by_time ON notifications(received_at);"
    "CREATE INDEX notifications_pending ON notifications(id)"
    "  WHERE evaluated_at IS NULL AND duplicate_of IS NULL;"
    "CREATE TABLE alerts ("
    "  id BIGINT PRIMARY KEY,"
    "  notification_id BIGINT NOT NULL REFERENCES notifications(id),"
    "  position BIGINT NOT NULL,"
    "  received_at BIGINT NOT NULL,"
    "  fingerprint TEXT NOT NULL,"
    "  status TEXT NOT NULL CHECK (status IN ('firing','resolved')),"
    "  alertname TEXT,"
    "  node TEXT,"
    "  starts_at BIGINT,"
    "  ends_at BIGINT,"
    "  generator_url TEXT,"
    "  labels TEXT NOT NULL,"
    "  annotations TEXT NOT NULL);"
    "CREATE INDEX alerts_by_notification ON alerts(notification_id);"
    "CREATE INDEX alerts_by_node ON alerts(node, received_at);"
    "CREATE INDEX alerts_by_alertname ON alerts(alertname, received_at);"
    "CREATE INDEX alerts_by_time ON alerts(received_at);"
    "CREATE TABLE decisions ("
    "  id BIGINT PRIMARY KEY,"
    "  created_at BIGINT NOT NULL,"
    "  notification_id BIGINT REFERENCES notifications(id),"
    "  alert_id BIGINT REFERENCES alerts(id),"
    "  fingerprint TEXT,"
    "  node TEXT,"
    "  alertname TEXT,"
    "  policy TEXT,"
    "  step BIGINT,"
    "  action TEXT,"
    "  params TEXT,"
    "  risk DOUBLE PRECISION,"
    "  model_hash TEXT,"
    "  verdict TEXT NOT NULL CHECK (verdict IN "
    "    ('execute','dry_run','suppressed','no_match','error')),"
    "  reason TEXT,"
    "  config_hash TEXT,"
    "  prev_hash TEXT NOT NULL,"
    "  hash TEXT NOT NULL);"
    "CREATE INDEX decisions_by_node ON decisions(node, created_at);"
    "CREATE INDEX decisions_by_alertname ON decisions(alertname, created_at);"
    "CREATE INDEX decisions_by_policy ON decisions(policy, created_at);"
    "CREATE INDEX decisions_by_verdict ON decisions(verdict, created_at);"
    "CREATE INDEX decisions_by_time ON decisions(created_at);"
    "CREATE INDEX decisions_by_fingerprint ON decisions(fingerprint);"
    "CREATE TABLE actions ("
    "  id BIGINT PRIMARY KEY,"
    "  created_at BIGINT NOT NULL,"
    "  decision_id BIGINT NOT NULL REFERENCES decisions(id),"
    "  phase TEXT NOT NULL CHECK (phase IN ('intent','outcome')),"
    "  intent_id BIGINT REFERENCES actions(id),"
    "  action TEXT NOT NULL,"
    "  node TEXT,"
    "  target TEXT,"
    "  params TEXT,"
    "  result TEXT NOT NULL CHECK (result IN "
    "    ('pending','succeeded','failed','timed_out','refused','interrupted')),"
    "  duration_ms BIGINT,"
    "  detail TEXT,"
    "  prev_hash TEXT NOT NULL,"
    "  hash TEXT NOT NULL,"
    "  CHECK ((phase = 'intent') = (result = 'pending')),"
    "  CHECK ((phase = 'outcome') = (intent_id IS NOT NULL)));"
    "CREATE UNIQUE INDEX actions_one_intent_per_decision ON actions(decision_id)"
    "  WHERE phase = 'intent';"
    "CREATE UNIQUE INDEX actions_one_outcome_per_intent ON actions(intent_id)"
    "  WHERE phase = 'outcome';"
    "CREATE INDEX actions_by_node ON actions(node, created_at);"
    "CREATE INDEX actions_by_time ON actions(created_at);"
    "CREATE INDEX actions_by_result ON actions(result, created_at);"
    "CREATE TABLE engine_state ("
    "  id BIGINT PRIMARY KEY CHECK (id = 1),"
    "  updated_at BIGINT NOT NULL,"
    "  state TEXT NOT NULL);"
    "CREATE TABLE incident_changes ("
    "  id BIGINT PRIMARY KEY,"
    "  created_at BIGINT NOT NULL,"
    "  incident BIGINT NOT NULL,"
    "  node TEXT,"
    "  policy TEXT,"
    "  from_state TEXT NOT NULL,"
    "  state TEXT NOT NULL,"
    "  cause TEXT,"
    "  decision_id BIGINT REFERENCES decisions(id),"
    "  prev_hash TEXT NOT NULL,"
    "  hash TEXT NOT NULL);"
    "CREATE INDEX incident_changes_by_incident ON incident_changes(incident, id);"
    "CREATE INDEX incident_changes_by_node ON incident_changes(node, created_at);"
    "CREATE INDEX incident_changes_by_time ON incident_changes(created_at);"
    "CREATE TABLE engine_rows ("
    "  kind TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  value TEXT NOT NULL,"
    "  PRIMARY KEY (kind, key));"
    /* several replicas: the leader's lease (lease.h) */
    "CREATE TABLE medic_lease ("
    "  id INTEGER PRIMARY KEY CHECK (id = 1),"
    "  holder TEXT NOT NULL,"
    "  epoch BIGINT NOT NULL,"
    "  expires_at TIMESTAMPTZ NOT NULL);";

int audit_pg_is_url(const char *location)
{
    return location && (strncmp(location, "postgresql://", 13) == 0 ||
                        strncmp(location, "postgres://", 11) == 0);
}

/* libpq's message, its trailing newline removed. */
int audit_pg_error(struct medic_error *err, PGconn *c, const char *what)
{
    char msg[300];
    snprintf(msg, sizeof(msg), "%s", c ? PQerrorMessage(c) : "out of memory");
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = 0;
    return medic_error_set(err, MEDIC_E_STORE, "postgresql: %s: %s", what, msg);
}

/* Runs sql (several statements are fine) expecting no rows. */
static int pg_exec(PGconn *c, const char *sql, const char *what, struct medic_error *err)
{
    PGresult *r = PQexec(c, sql);
    int ok = r && (PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK);
    PQclear(r);
    return ok ? 0 : audit_pg_error(err, c, what);
}

int audit_pg_connect(const char *url, PGconn **out, struct medic_error *err)
{
    *out = NULL;
    const char *keys[] = {"dbname", "connect_timeout", "application_name", NULL};
    const char *values[] = {url, "10", "medic", NULL};
    PGconn *c = PQconnectdbParams(keys, values, 1);
    if (!c || PQstatus(c) != CONNECTION_OK) {
        int rc = audit_pg_error(err, c, "cannot connect");
        PQfinish(c);
        return rc;
    }
    if (pg_exec(c,
                "SET lock_timeout = '2s'; SET idle_in_transaction_session_timeout = '3s';"
                "SET client_min_messages = warning; SET extra_float_digits = 3",
                "cannot set the session up", err)) {
        PQfinish(c);
        return err->code;
    }
    *out = c;
    return 0;
}

int audit_pg_schema(PGconn *c, struct medic_error *err)
{
    if (pg_exec(c, "CREATE TABLE IF NOT EXISTS medic_schema (version INTEGER NOT NULL)",
                "cannot create medic_schema", err))
        return err->code;
    PGresult *r = PQexec(c, "SELECT max(version) FROM medic_schema");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        PQclear(r);
        return audit_pg_error(err, c, "cannot read the schema version");
    }
    int version = PQgetisnull(r, 0, 0) ? 0 : atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    const int newest = audit_schema_version();
    if (version > newest)
        return medic_error_set(err, MEDIC_E_STORE,
                               "postgresql: the audit log's schema is version %d; this medic "
                               "knows up to %d (upgrade medic)",
                               version, newest);
    if (version == newest)
        return 0;
    if (version != 0)
        return medic_error_set(err, MEDIC_E_STORE,
                               "postgresql: schema version %d cannot be migrated by this medic",
                               version);
    char set[64];
    snprintf(set, sizeof(set), "INSERT INTO medic_schema VALUES (%d)", newest);
    if (pg_exec(c, "BEGIN", "cannot begin", err) ||
        pg_exec(c, pg_schema, "cannot create the tables", err) ||
        pg_exec(c, set, "cannot record the schema version", err) ||
        pg_exec(c, "COMMIT", "cannot commit the schema", err)) {
        PQclear(PQexec(c, "ROLLBACK"));
        return err->code;
    }
    return 0;
}

int audit_pg_verify(PGconn *c, struct audit_verify_result *out, struct medic_error *err)
{
    struct db *d = db_over_pg(c);
    if (!d)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    int rc = audit_chain_verify(d, out, err);
    db_free(d);
    return rc;
}
