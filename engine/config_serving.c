#include "config.h"

#include <stdio.h>

static int fail_serving(const struct medic_config *config, int line, int col,
                        struct medic_error *err, const char *msg)
{
    if (line > 0)
        return medic_error_set(err, MEDIC_E_INVALID, "%s:%d:%d: %s", config->source, line, col,
                               msg);
    return medic_error_set(err, MEDIC_E_INVALID, "%s: %s", config->source, msg);
}

static int has_disruptive_steps(const struct policy_set *ps)
{
    for (size_t i = 0; i < ps->count; i++)
        for (size_t k = 0; k < ps->items[i].step_count; k++)
            if (medic_action_disruptive(ps->items[i].steps[k].action.kind))
                return 1;
    return 0;
}

int medic_config_check_serving(const struct medic_config *config, struct medic_error *err)
{
    if (config->mode != MEDIC_MODE_LIVE)
        return 0;
    if (!config->webhook_auth.bearer_token && !config->webhook_auth.basic_username)
        return fail_serving(config, config->mode_line, config->mode_col, err,
                            "mode: live needs authentication on the webhook (auth: "
                            "webhook_bearer_token_file or webhook_basic_auth): anyone who "
                            "reaches the port could trigger power cycles");
    if (has_disruptive_steps(&config->policies) && !config->policies.safety.storm_notifier)
        return fail_serving(config, config->storm_line ? config->storm_line : config->mode_line,
                            config->storm_line ? config->storm_col : config->mode_col, err,
                            "mode: live with disruptive policies needs safety.storm.notifier: a "
                            "storm would hold actions back and tell nobody");
    return 0;
}

const char *medic_config_warning(const struct medic_config *config)
{
    if (config->mode != MEDIC_MODE_LIVE && has_disruptive_steps(&config->policies) &&
        !config->policies.safety.storm_notifier)
        return "disruptive policies and no safety.storm.notifier: a storm would hold actions "
               "back and tell nobody; medic serve refuses this in mode: live";
    return NULL;
}

static int credentials_set(const struct medic_credentials *c)
{
    return c->bearer_token || c->basic_username;
}

const struct medic_credentials *medic_config_read_auth(const struct medic_config *config)
{
    if (credentials_set(&config->read_auth) || config->mode != MEDIC_MODE_LIVE)
        return &config->read_auth;
    return &config->webhook_auth;
}

const struct medic_credentials *medic_config_admin_auth(const struct medic_config *config)
{
    if (credentials_set(&config->admin_auth) || config->mode != MEDIC_MODE_LIVE)
        return &config->admin_auth;
    return &config->webhook_auth;
}
