/* SPDX-License-Identifier: Apache-2.0 */
/* Word from PostgreSQL that an engine took people's requests: a
 * connection of its own that LISTENs on the channel the engine's
 * transaction NOTIFYs when it marks requests taken (rows.c), delivered at
 * that transaction's commit to every replica. */
#include "pg.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pg_listener {
    char *url;
    PGconn *c; /* NULL until connected, and after a break */
};

/* Connected and listening, or err set. */
static int listening(struct pg_listener *l, struct medic_error *err)
{
    if (l->c && PQstatus(l->c) == CONNECTION_OK)
        return 0;
    PQfinish(l->c);
    l->c = NULL;
    int rc = audit_pg_connect(l->url, &l->c, err);
    if (rc)
        return rc;
    PGresult *r = PQexec(l->c, "LISTEN " AUDIT_PG_TAKEN_CHANNEL);
    rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : audit_pg_error(err, l->c, "cannot listen");
    PQclear(r);
    if (rc) {
        PQfinish(l->c);
        l->c = NULL;
    }
    return rc;
}

int audit_pg_listen_open(const char *location, void **out, struct medic_error *err)
{
    struct pg_listener *l = calloc(1, sizeof(*l));
    if (!l || !(l->url = strdup(location))) {
        free(l);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    int rc = listening(l, err);
    if (rc) {
        audit_pg_listen_free(l);
        return rc;
    }
    *out = l;
    return 0;
}

void audit_pg_listen_free(void *listener)
{
    struct pg_listener *l = listener;
    if (!l)
        return;
    PQfinish(l->c);
    free(l->url);
    free(l);
}

int audit_pg_listen_wait(void *listener, int wake_fd, int timeout_ms, struct medic_error *err)
{
    struct pg_listener *l = listener;
    int rc = listening(l, err);
    if (rc)
        return rc;
    struct pollfd fds[2] = {{PQsocket(l->c), POLLIN, 0}, {wake_fd, POLLIN, 0}};
    int n = poll(fds, wake_fd >= 0 ? 2 : 1, timeout_ms);
    if (n < 0 && errno != EINTR)
        return medic_error_set(err, MEDIC_E_STORE, "cannot wait for PostgreSQL: %s",
                               strerror(errno));
    int said = 0;
    if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
        if (!PQconsumeInput(l->c))
            return audit_pg_error(err, l->c, "the listening connection broke");
        for (PGnotify *note; (note = PQnotifies(l->c)) != NULL; PQfreemem(note))
            said = 1;
    }
    return said ? AUDIT_LISTEN_SAID : 0;
}
