/* SPDX-License-Identifier: Apache-2.0 */
/* What the on-call page (page/) reads of the daemon and asks of it: its
 * state with the running configuration's view, the audit log, the
 * replicas, a node's agent, a reader thread, and a person's requests as
 * the HTTP API takes them. */
#include "engine_serve.h"
#include "agent_client.h"
#include "engine_evaluate.h"
#include "engine_runners.h"

struct view_call {
    page_state_fn fn;
    void *arg;
    struct page_view view;
};

static int view_state(void *arg, struct policy_state *st)
{
    struct view_call *c = arg;
    return c->fn(c->arg, &c->view, st);
}

static int with_state(void *ctx, page_state_fn fn, void *arg, struct medic_error *err)
{
    struct engine *e = ctx;
    const struct medic_config *config = config_slot_acquire(e->configs);
    struct policy_context pc;
    engine_context_from_config(config, &pc);
    struct view_call c = {
        fn, arg, {&pc, medic_mode_name(config->mode), medic_mode_acts(config->mode)}};
    int rc = engine_with_state(e, view_state, &c, err);
    medic_config_unref(config);
    return rc;
}

static int open_reader(void *ctx, struct audit_reader **out, struct medic_error *err)
{
    struct engine *e = ctx;
    return audit_reader_open(e->audit_path, out, err);
}

static void replicas(void *ctx, char *out, size_t size)
{
    struct engine *e = ctx;
    out[0] = '\0';
    if (e->leader)
        engine_leader_describe(e->leader, out, size);
}

static int node_health(void *ctx, const char *node, struct medic_buf *report, int *gpus, char *why,
                       size_t size)
{
    struct engine *e = ctx;
    const struct medic_config *c = config_slot_acquire(e->configs);
    const struct inventory_node *inv = inventory_find(&c->inventory, node);
    const struct credential *cred = engine_agent_of(c, inv, node, why, size);
    *gpus = inv ? inv->gpus : 0;
    int rc = !cred ? 1
             : agent_health_read(inv->agent_url, cred->token, 1000, report, why, size) ==
                     MEDIC_OUTCOME_SUCCEEDED
                 ? 0
                 : -1;
    medic_config_unref(c);
    return rc;
}

static int run_later(void *ctx, int (*job)(void *arg, struct medic_buf *out), void *arg,
                     void (*free_arg)(void *arg), const struct receiver_later *later)
{
    struct engine *e = ctx;
    return engine_readers_run(e->readers, job, arg, free_arg, later);
}

void engine_page_source(struct engine *e, struct page_source *out)
{
    *out = (struct page_source){.ctx = e,
                                .with_state = with_state,
                                .open_reader = open_reader,
                                .replicas = replicas,
                                .agent_health = node_health,
                                .run_later = run_later,
                                .approve = engine_api_approve,
                                .release = engine_api_release,
                                .pause = engine_api_pause};
}

int engine_page(void *engine, enum receiver_page page, const char *arg, const char *authorization,
                const struct receiver_later *later, struct medic_buf *out)
{
    struct engine *e = engine;
    return page_render(&e->page, page, arg, authorization, later, out);
}

int engine_page_form(void *engine, enum receiver_page form, const char *arg, const char *body,
                     size_t len, const char *who, const char *authorization, const char *origin,
                     const char *host, const char *remote_addr, const struct receiver_later *later,
                     struct medic_buf *out)
{
    struct engine *e = engine;
    return page_form(&e->page, form, arg, body, len, who, authorization, origin, host, remote_addr,
                     later, out);
}
