/* The subcommands of the medic binary. Each takes argc/argv starting at
 * its own name and returns the process exit code: 0 ok, 1 error or failed
 * check, 2 usage. */
#ifndef MEDIC_COMMANDS_H
#define MEDIC_COMMANDS_H

int medic_cmd_serve(int argc, char **argv);
int medic_cmd_audit(int argc, char **argv);
int medic_cmd_check(int argc, char **argv);
int medic_cmd_version(int argc, char **argv);
int medic_cmd_dry_run(int argc, char **argv);
int medic_cmd_policy(int argc, char **argv);
int medic_cmd_replay(int argc, char **argv);
int medic_cmd_agent(int argc, char **argv);
int medic_cmd_model(int argc, char **argv);
int medic_cmd_predict(int argc, char **argv);
/* medic model dataset, argv starting at "dataset" */
int medic_cmd_model_dataset(int argc, char **argv);

/* Parses a --format value for command: table or json, and csv when
 * allow_csv. Prints the error and returns -1 when the value is not one. */
int medic_cli_format(const char *command, const char *value, int allow_csv);

/* "medic" plus build facts, for version output and /metrics. */
extern const char medic_version[];

#endif
