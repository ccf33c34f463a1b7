/* SPDX-License-Identifier: Apache-2.0 */
/* medic inventory import --slurm: an inventory written from Slurm's own
 * list of nodes, like nodes in one entry each named by a hostlist; medic
 * inventory check: the inventory's nodes that Slurm does not know. */
#include "agent.h"
#include "commands.h"
#include "config.h"
#include "hostlist.h"
#include "options.h"
#include "slurm.h"
#include "timeutil.h"
#include "yaml_tree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_help help = {
    "usage: medic inventory import --slurm [--slurm-conf FILE] [--scontrol PATH]\n"
    "                              [--from FILE] [--bmc TEMPLATE]\n"
    "                              [--bmc-credentials NAME] [--agent TEMPLATE]\n"
    "                              [--agent-credentials NAME] [--out FILE]\n"
    "       medic inventory check --config FILE [--slurm-conf FILE] [--scontrol PATH]\n"
    "                             [--from FILE]\n"
    "\n"
    "import writes an inventory (docs/configuration.md) from Slurm's list of\n"
    "nodes (`scontrol show nodes --json`, or --from a file holding it): nodes of\n"
    "one partition set, GPU count and labels, named alike, become one entry\n"
    "named by a Slurm hostlist (gpu-[0001-1200]), with their GPUs from Gres,\n"
    "and as labels (for safety.group_caps) their partitions (partition), their\n"
    "leaf switch in Slurm's topology (switch; `scontrol show topology`) and each\n"
    "feature written key=value (rack=r01: rack), the Slurm node\n"
    "as {{ node }}, and, with --bmc and --agent, templates such as\n"
    "'{{ node }}-bmc:623' and 'http://{{ node }}:" MEDIC_AGENT_PORT "' for the BMC and agent.\n"
    "The file is commented; review it, then point inventory.file at it.\n"
    "\n"
    "check lists the nodes of a configuration's inventory whose Slurm node\n"
    "Slurm does not know (exit 1 when there are any), and the Slurm nodes the\n"
    "inventory leaves out.\n"
    "\n",
    "Exit status: 0 done, 1 an error or nodes Slurm does not know, 2 bad usage.\n",
};

struct source {
    const char *slurm_conf, *scontrol, *from;
};

/* scontrol as the command line says, a minute at most. */
static void source_options(const struct source *src, struct slurm_options *o)
{
    slurm_options_default(o);
    o->timeout_ms = 60000;
    if (src->slurm_conf)
        o->slurm_conf = src->slurm_conf;
    if (src->scontrol)
        o->scontrol = src->scontrol;
}

static int read_nodes(const struct source *src, struct slurm_node_list *out,
                      struct medic_error *err)
{
    if (!src->from) {
        struct slurm_options o;
        source_options(src, &o);
        return slurm_nodes_read(&o, out, err);
    }
    char *text;
    size_t len;
    if (medic_read_file(src->from, (size_t)256 << 20, &text, &len, err))
        return err->code;
    int rc = slurm_nodes_parse(text, len, out, err);
    free(text);
    return rc;
}

/* A name cut into its prefix and trailing number (number -1: none). */
struct named {
    const struct slurm_node_info *node;
    char prefix[128];
    long number;
    int width;
    char labels[600]; /* its labels as YAML flow pairs: partition, switch, features */
};

/* A feature's key=value as a label: key a label name, value plain. */
static void feature_label(const char *feature, size_t len, char *out, size_t size)
{
    const char *eq = memchr(feature, '=', len);
    size_t klen = eq ? (size_t)(eq - feature) : 0;
    out[0] = '\0';
    if (!eq || klen == 0 || klen > 63 || len - klen - 1 == 0 || len - klen - 1 > 63)
        return;
    for (size_t i = 0; i < len; i++) {
        char c = feature[i];
        int word =
            c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!(word || (i > klen && (c == '-' || c == '.'))) && i != klen)
            return;
    }
    if (feature[0] >= '0' && feature[0] <= '9')
        return;
    snprintf(out, size, "%.*s: '%.*s'", (int)klen, feature, (int)(len - klen - 1), eq + 1);
}

/* x's labels: its partitions, its leaf switch in Slurm's topology, and
 * each feature written key=value (rack=r01: rack). */
static void make_labels(struct named *x, const struct slurm_switch_list *sw,
                        struct medic_hostlist **leaves)
{
    const struct slurm_node_info *n = x->node;
    size_t at = 0;
    x->labels[0] = '\0';
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (at < sizeof(x->labels))                                                                \
            at += (size_t)snprintf(x->labels + at, sizeof(x->labels) - at, __VA_ARGS__);           \
    } while (0)
    if (n->partitions[0])
        ADD("partition: '%.63s'", n->partitions);
    for (size_t i = 0; sw && i < sw->count; i++)
        if (leaves[i] && medic_hostlist_match(leaves[i], n->name)) {
            ADD("%sswitch: '%.63s'", at ? ", " : "", sw->items[i].name);
            break;
        }
    for (const char *f = n->features ? n->features : ""; *f;) {
        size_t len = strcspn(f, ",");
        char label[160];
        feature_label(f, len, label, sizeof(label));
        if (label[0] && !strstr(x->labels, label))
            ADD("%s%s", at ? ", " : "", label);
        f += len + (f[len] == ',');
    }
#undef ADD
}

static void split(struct named *x)
{
    const char *s = x->node->name;
    size_t len = strlen(s), d = len;
    while (d > 0 && s[d - 1] >= '0' && s[d - 1] <= '9' && len - d < 9)
        d--;
    snprintf(x->prefix, sizeof(x->prefix), "%.*s", (int)d, s);
    x->number = d < len && d < sizeof(x->prefix) - 1 ? strtol(s + d, NULL, 10) : -1;
    x->width = x->number >= 0 ? (int)(len - d) : 0;
}

static int read_topology(const struct source *src, struct slurm_switch_list *out,
                         struct medic_error *err)
{
    struct slurm_options o;
    source_options(src, &o);
    return slurm_topology_read(&o, out, err);
}

static int compare(const void *a, const void *b)
{
    const struct named *x = a, *y = b;
    int c = strcmp(x->labels, y->labels);
    if (!c)
        c = x->node->gpus - y->node->gpus;
    if (!c)
        c = strcmp(x->prefix, y->prefix);
    if (!c)
        c = x->width - y->width;
    if (!c)
        c = x->number < y->number ? -1 : x->number > y->number;
    return c;
}

static int same_entry(const struct named *a, const struct named *b)
{
    return a->number >= 0 && b->number >= 0 && strcmp(a->labels, b->labels) == 0 &&
           a->node->gpus == b->node->gpus && strcmp(a->prefix, b->prefix) == 0 &&
           a->width == b->width;
}

struct templates {
    const char *bmc, *bmc_credentials, *agent, *agent_credentials;
};

/* One entry: nodes v[0..n) of one kind, their numbers as ranges. */
static void write_entry(FILE *out, const struct named *v, size_t n, const struct templates *t)
{
    char name[4200];
    if (n == 1 || v[0].number < 0) {
        snprintf(name, sizeof(name), "%s", v[0].node->name);
    } else {
        size_t at = (size_t)snprintf(name, sizeof(name), "%s[", v[0].prefix);
        for (size_t i = 0; i < n;) {
            size_t j = i;
            while (j + 1 < n && v[j + 1].number == v[j].number + 1)
                j++;
            at += (size_t)snprintf(name + at, sizeof(name) - at, "%s%0*ld", i ? "," : "",
                                   v[i].width, v[i].number);
            if (j > i)
                at += (size_t)snprintf(name + at, sizeof(name) - at, "-%0*ld", v[j].width,
                                       v[j].number);
            i = j + 1;
        }
        snprintf(name + at, sizeof(name) - at, "]");
    }
    const struct slurm_node_info *x = v[0].node;
    fprintf(out, "  # partitions %s; %d GPU(s) each; %zu node(s)\n",
            x->partitions[0] ? x->partitions : "(none)", x->gpus, n);
    fprintf(out, "  - name: '%s'\n    slurm: { node: '{{ node }}' }\n", name);
    if (x->gpus)
        fprintf(out, "    gpus: %d\n", x->gpus);
    if (v[0].labels[0])
        fprintf(out, "    labels: { %s }\n", v[0].labels);
    if (t->bmc)
        fprintf(out, "    bmc: { address: '%s', credentials: %s }\n", t->bmc,
                t->bmc_credentials ? t->bmc_credentials : "bmc");
    if (t->agent)
        fprintf(out, "    agent: { url: '%s', credentials: %s }\n", t->agent,
                t->agent_credentials ? t->agent_credentials : "agent");
}

/* The entries: a run of like names in one entry, at most 32 ranges (a
 * hostlist bracket's cap) and 200 names each, so that each stays short. */
static size_t write_inventory(FILE *out, struct named *v, size_t count, const struct templates *t)
{
    size_t entries = 0;
    for (size_t i = 0; i < count;) {
        size_t j = i + 1, ranges = 1;
        while (j < count && same_entry(&v[i], &v[j]) && j - i < 4096) {
            ranges += v[j].number != v[j - 1].number + 1;
            if (ranges > 32)
                break;
            j++;
        }
        write_entry(out, v + i, j - i, t);
        entries++;
        i = j;
    }
    return entries;
}

static int import(const struct source *src, const struct templates *t, const char *path)
{
    struct slurm_node_list l;
    struct medic_error err = {0};
    if (read_nodes(src, &l, &err)) {
        fprintf(stderr, "medic inventory import: %s\n", err.msg);
        return 1;
    }
    if (l.count == 0) {
        fprintf(stderr, "medic inventory import: Slurm lists no nodes\n");
        slurm_node_list_release(&l);
        return 1;
    }
    struct named *v = calloc(l.count, sizeof(*v));
    FILE *out = path ? fopen(path, "w") : stdout;
    int rc = 0;
    if (!v || !out) {
        fprintf(stderr, "medic inventory import: %s\n",
                v ? "cannot write the file (--out)" : "out of memory");
        rc = 1;
    } else {
        /* Slurm's topology (topology/tree): each node's leaf switch */
        struct slurm_switch_list sw = {0};
        struct medic_hostlist **leaves = NULL;
        if (!src->from && read_topology(src, &sw, &err))
            fprintf(stderr, "medic inventory import: warning: no switch labels (%s)\n", err.msg);
        leaves = calloc(sw.count + 1, sizeof(*leaves));
        for (size_t i = 0; leaves && i < sw.count; i++) {
            char why[200];
            if (sw.items[i].level == 0 &&
                medic_hostlist_parse(sw.items[i].nodes, &leaves[i], why, sizeof(why)))
                leaves[i] = NULL;
        }
        size_t no_gpus = 0;
        for (size_t i = 0; i < l.count; i++) {
            v[i].node = &l.items[i];
            split(&v[i]);
            make_labels(&v[i], &sw, leaves);
            no_gpus += l.items[i].gpus == 0;
        }
        for (size_t i = 0; leaves && i < sw.count; i++)
            medic_hostlist_free(leaves[i]);
        free(leaves);
        slurm_switch_list_release(&sw);
        if (no_gpus)
            fprintf(stderr,
                    "medic inventory import: warning: %zu of %zu node(s) show no GPU in their "
                    "Gres: their entries say no gpus (a verify cannot count their GPUs); fix "
                    "Gres in slurm.conf, or add gpus: N to them\n",
                    no_gpus, l.count);
        qsort(v, l.count, sizeof(*v), compare);
        char now[40];
        medic_time_format(medic_time_now(), now, sizeof(now));
        fprintf(out,
                "# medic inventory, imported from Slurm (scontrol show nodes --json) at %s:\n"
                "# %zu node(s). Each entry names like nodes with a Slurm hostlist, and\n"
                "# {{ node }} in its strings is each node's name. Review the BMC and agent\n"
                "# templates, put the credentials they name in the credentials file, and\n"
                "# add labels (rack, pdu) for safety.group_caps where you have them.\n"
                "nodes:\n",
                now, l.count);
        size_t entries = write_inventory(out, v, l.count, t);
        if (path)
            fprintf(stderr, "medic inventory import: %zu node(s) in %zu entries written to %s\n",
                    l.count, entries, path);
    }
    if (out && out != stdout && fclose(out)) {
        fprintf(stderr, "medic inventory import: cannot write %s\n", path);
        rc = 1;
    }
    free(v);
    slurm_node_list_release(&l);
    return rc;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int check(const struct source *src, const char *config_path)
{
    struct medic_config c;
    struct medic_error err = {0};
    if (medic_config_load(config_path, &c, &err)) {
        fprintf(stderr, "medic inventory check: %s\n", err.msg);
        return 1;
    }
    struct slurm_node_list l;
    if (read_nodes(src, &l, &err)) {
        fprintf(stderr, "medic inventory check: %s\n", err.msg);
        medic_config_release(&c);
        return 1;
    }
    /* both lists sorted by Slurm name, so that 100,000 nodes cost little */
    const char **slurm = calloc(l.count + 1, sizeof(*slurm));
    const char **ours = calloc(c.inventory.count + 1, sizeof(*ours));
    size_t unknown = 0, left_out = 0, with_slurm = 0;
    for (size_t k = 0; slurm && k < l.count; k++)
        slurm[k] = l.items[k].name;
    for (size_t i = 0; ours && i < c.inventory.count; i++)
        if (c.inventory.nodes[i].slurm_node)
            ours[with_slurm++] = c.inventory.nodes[i].slurm_node;
    if (slurm && ours) {
        qsort(slurm, l.count, sizeof(*slurm), compare_names);
        qsort(ours, with_slurm, sizeof(*ours), compare_names);
        for (size_t i = 0; i < c.inventory.count; i++) {
            const struct inventory_node *n = &c.inventory.nodes[i];
            if (n->slurm_node &&
                !bsearch(&n->slurm_node, slurm, l.count, sizeof(*slurm), compare_names)) {
                printf("not in Slurm: %s (slurm node %s)\n", n->name, n->slurm_node);
                unknown++;
            }
        }
        for (size_t k = 0; k < l.count; k++)
            if (!bsearch(&slurm[k], ours, with_slurm, sizeof(*ours), compare_names)) {
                printf("not in the inventory: %s\n", slurm[k]);
                left_out++;
            }
    }
    free(slurm);
    free(ours);
    printf("%zu inventory node(s) with a slurm node, %zu Slurm does not know; %zu Slurm node(s) "
           "the inventory leaves out (medic never acts on them)\n",
           with_slurm, unknown, left_out);
    slurm_node_list_release(&l);
    medic_config_release(&c);
    return unknown ? 1 : 0;
}

int medic_cmd_inventory(int argc, char **argv)
{
    struct source src = {0};
    struct templates t = {0};
    const char *out = NULL, *config = NULL;
    int from_slurm = 0;
    const struct cli_option options[] = {
        CLI_OPT_FLAG("slurm", &from_slurm,
                     "import: read Slurm's nodes with scontrol show nodes --json"),
        CLI_OPT_STRING("from", &src.from, "FILE", "read them from a file holding that output"),
        CLI_OPT_STRING("slurm-conf", &src.slurm_conf, "FILE",
                       "the slurm.conf scontrol reads (SLURM_CONF)"),
        CLI_OPT_STRING("scontrol", &src.scontrol, "PATH", "the scontrol to run"),
        CLI_OPT_STRING("bmc", &t.bmc, "TEMPLATE",
                       "import: each node's BMC, such as '{{ node }}-bmc:623'"),
        CLI_OPT_STRING("bmc-credentials", &t.bmc_credentials, "NAME",
                       "import: the credentials entry for the BMCs"),
        CLI_OPT_STRING("agent", &t.agent, "TEMPLATE",
                       "import: each node's agent, such as 'http://{{ node }}:" MEDIC_AGENT_PORT
                       "'"),
        CLI_OPT_STRING("agent-credentials", &t.agent_credentials, "NAME",
                       "import: the credentials entry for the agents"),
        CLI_OPT_STRING("out", &out, "FILE", "import: write here (default: standard output)"),
        CLI_OPT_STRING("config", &config, "FILE",
                       "check: the configuration whose inventory to check"),
        CLI_OPT_END,
    };
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        cli_usage(stdout, &help, options);
        return 0;
    }
    int importing = argc >= 2 && strcmp(argv[1], "import") == 0;
    if (argc < 2 || (!importing && strcmp(argv[1], "check") != 0))
        return cli_usage_error("inventory", &help, options, "expected import or check");
    const char *command = importing ? "inventory import" : "inventory check";
    int rest = 0;
    int rc = cli_parse(command, &help, argc, argv, 2, options, &rest);
    if (rc) {
        rc = rc == 1 ? 0 : 2;
    } else if (rest != argc) {
        rc = cli_usage_error(command, &help, options, "unexpected argument '%s'", argv[rest]);
    } else if (importing && !from_slurm && !src.from) {
        fprintf(stderr,
                "medic %s: name the source: --slurm (scontrol show nodes --json) or --from FILE\n",
                command);
        rc = 2;
    } else if (importing) {
        rc = import(&src, &t, out);
    } else if (!config) {
        fprintf(stderr, "medic %s: needs --config, the configuration whose inventory to check\n",
                command);
        rc = 2;
    } else {
        rc = check(&src, config);
    }
    return rc;
}
