// The environment variables wizq reads and those it sets for the processes
// of tasks, in one table: the code names them through the constants, and
// the man pages' ENVIRONMENT section (cli/docgen/) prints the table.
// docs/PROTOCOL.md, "The task protocol", says the same for the task's side.
#ifndef WIZQ_UTIL_ENVIRONMENT_H_
#define WIZQ_UTIL_ENVIRONMENT_H_

namespace wizq {

enum class EnvUse {
  kRead,     // wizq reads it
  kForTask,  // wizq sets it in the environment of a task's process
};

// The commands that take --store.
#define WIZQ_ENV_STORE_COMMANDS                                          \
  "run,status,log,report,answer,export,prune,runs,mcp,db,db migrate,db " \
  "status,agent,agent take,agent done,agent fail,agent heartbeat,agent " \
  "release,agent serve"

// X(constant, name, use, commands, meaning). `commands`: the commands
// whose man page lists the variable, comma-separated ("run,agent serve");
// wizq(1) lists them all.
#define WIZQ_ENVIRONMENT(X)                                                   \
  X(kEnvNoColor, "NO_COLOR", kRead, "run",                                    \
    "When set to a non-empty value, the progress line on a terminal is not "  \
    "coloured (https://no-color.org).")                                       \
  X(kEnvStore, "WIZQ_STORE", kRead, WIZQ_ENV_STORE_COMMANDS,                  \
    "The PostgreSQL store (a postgresql:// URL or a libpq keyword string) "   \
    "when --store is not given; unset or empty: the directory store in "      \
    "--dir. Removed from the environment of tasks and agents.")               \
  X(kEnvPgPassword, "PGPASSWORD", kRead, WIZQ_ENV_STORE_COMMANDS,             \
    "The store's password, read by libpq, as are its other variables "        \
    "(PGHOST, PGUSER, PGPASSFILE, PGSERVICEFILE, PGSSLMODE...: PostgreSQL's " \
    "documentation, libpq, \"Environment Variables\"). PGPASSWORD and "       \
    "WIZQ_STORE are removed from the environment of tasks and agents; the "   \
    "others are kept.")                                                       \
  X(kEnvTmpdir, "TMPDIR", kRead, "crashtest",                                 \
    "Where the scratch directories are created (default /tmp).")              \
  X(kEnvCrashAt, "WIZQ_CRASH_AT", kRead, "run,crashtest",                     \
    "For crash tests: POINT[:N] makes wizq exit at once (status 86) the Nth " \
    "time it passes that durable step (docs/RELIABILITY.md lists them).")     \
  X(kEnvCrashIf, "WIZQ_CRASH_IF", kRead, "run,crashtest",                     \
    "For crash tests, with WIZQ_CRASH_AT: only the passes whose durable "     \
    "batch holds this text count (an event as written, e.g. "                 \
    "\"event\":\"task_completed\",\"id\":4,).")                               \
  X(kEnvRunId, "WIZQ_RUN_ID", kForTask, "run,agent serve",                    \
    "The run's id, e.g. r6e695926b9e6dac8.")                                  \
  X(kEnvTaskId, "WIZQ_TASK_ID", kForTask, "run,agent serve",                  \
    "The task's id: unique in the run, stable across attempts and resumes.")  \
  X(kEnvAttempt, "WIZQ_ATTEMPT", kForTask, "run,agent serve",                 \
    "This attempt's number, from 1.")                                         \
  X(kEnvInstallDir, "WIZQ_INSTALL_DIR", kForTask, "run,agent serve",          \
    "The install directory, absolute and canonical.")                         \
  X(kEnvIdempotencyKey, "WIZQ_IDEMPOTENCY_KEY", kForTask, "run,agent serve",  \
    "The same for every attempt and resume of this task, never the same in "  \
    "another run: the key of side effects that must happen once.")            \
  X(kEnvStep, "WIZQ_STEP", kForTask, "run,agent serve",                       \
    "The task's step (for a finally hook: its owner's step).")                \
  X(kEnvOrigin, "WIZQ_ORIGIN", kForTask, "run",                               \
    "Command tasks: Initial (the entry task), Spawned or Finally (a finally " \
    "hook).")                                                                 \
  X(kEnvLease, "WIZQ_LEASE", kForTask, "agent serve",                         \
    "wizq agent serve's COMMAND: the lease token of the task it works on.")

#define WIZQ_ENV_CONSTANT(constant, name, use, commands, meaning) \
  inline constexpr char constant[] = name;
WIZQ_ENVIRONMENT(WIZQ_ENV_CONSTANT)
#undef WIZQ_ENV_CONSTANT

struct EnvVarInfo {
  const char* name;
  EnvUse use;
  const char* commands;
  const char* meaning;
};

inline constexpr EnvVarInfo kEnvironment[] = {
#define WIZQ_ENV_INFO(constant, name, use, commands, meaning) \
  {name, EnvUse::use, commands, meaning},
    WIZQ_ENVIRONMENT(WIZQ_ENV_INFO)
#undef WIZQ_ENV_INFO
};

}  // namespace wizq

#endif  // WIZQ_UTIL_ENVIRONMENT_H_
