/* SPDX-License-Identifier: Apache-2.0 */
/* The subcommands of the medic binary. Each takes argc/argv starting at
 * its own name and returns the process exit code: 0 ok, 1 error or failed
 * check, 2 usage. */
#ifndef MEDIC_COMMANDS_H
#define MEDIC_COMMANDS_H

#include <stddef.h>
#include <stdint.h>

int medic_cmd_serve(int argc, char **argv);
int medic_cmd_audit(int argc, char **argv);
int medic_cmd_check(int argc, char **argv);
/* medic check live, argv starting at "live" */
int medic_cmd_check_live(int argc, char **argv);
int medic_cmd_version(int argc, char **argv);
int medic_cmd_dry_run(int argc, char **argv);
int medic_cmd_policy(int argc, char **argv);
int medic_cmd_replay(int argc, char **argv);
int medic_cmd_what_if(int argc, char **argv);
int medic_cmd_agent(int argc, char **argv);
int medic_cmd_model(int argc, char **argv);
int medic_cmd_predict(int argc, char **argv);
int medic_cmd_approve(int argc, char **argv);
int medic_cmd_deny(int argc, char **argv);
int medic_cmd_pause(int argc, char **argv);
int medic_cmd_unpause(int argc, char **argv);
int medic_cmd_node(int argc, char **argv);
int medic_cmd_inventory(int argc, char **argv);
/* medic model dataset, argv starting at "dataset" */
int medic_cmd_model_dataset(int argc, char **argv);
/* medic model check --dataset: 0 deploy, 1 refused or an error */
int medic_cmd_model_check_dataset(const char *model_path, const char *against_path,
                                  const char *dataset_path, size_t draws, uint64_t seed);

/* "medic" plus build facts, for version output and /metrics. */
extern const char medic_version[];

#endif
