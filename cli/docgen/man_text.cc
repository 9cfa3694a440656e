#include "cli/docgen/man_text.h"

namespace wizq::docgen {
namespace {

// Steps the examples share.
const std::string kInstaller =
    "$ cp -r /usr/share/doc/wizq/examples/installer .\n";
const std::string kInstalled = kInstaller +
                               "$ wizq run installer/workflow.jsonc "
                               "--dir install --quiet\n";
const std::string kReview = "$ cp -r /usr/share/doc/wizq/examples/review .\n";
// The review example's run in the background, waiting for agents. The
// directory is made first: an agent may only wait for a run in a
// directory that exists.
const std::string kReviewRun =
    kReview +
    "$ mkdir rev; wizq run review/workflow.jsonc --dir rev --quiet &\n";
// ... and one of its tasks taken.
const std::string kReviewTaken =
    kReviewRun +
    "$ until payload=$(wizq agent take --dir rev --wait 5); do sleep 1; "
    "done\n"
    "$ id=$(printf '%s' \"$payload\" | jq -r .task_id)\n"
    "$ lease=$(printf '%s' \"$payload\" | jq -r .lease)\n";
const std::string kServeTheRest =
    "$ wizq agent serve --dir rev -- \"$PWD/review/agent.sh\"\n"
    "$ wait $!\n";
const char kServeTheRestWhat[] =
    "Let wizq agent serve do the other tasks, with the example's scripted "
    "agent; the run then finishes:";

std::vector<ManText> Texts() {
  return {
      {"",
       "wizq runs a workflow (a JSON or JSONC file of named steps) on an "
       "install directory and keeps the whole state of the run in that "
       "directory, under .wizard/, written durably at every step. Kill it "
       "at any moment (kill -9, Ctrl+C, a power cut) and run the same "
       "command again: the run resumes, a completed task never runs again, "
       "and any number of wizq processes can work on one directory at "
       "once.\n\n"
       "Each command has its own page, listed under COMMANDS. The "
       "documentation (README.md and docs/) is in /usr/share/doc/wizq/, "
       "the examples in /usr/share/doc/wizq/examples/.",
       {{"Copy the installer example, run it into ./install and look at the "
         "result:",
         kInstaller + "$ wizq run installer/workflow.jsonc --dir install\n"
                      "$ wizq status --dir install\n"
                      "$ cat install/SUMMARY.txt\n"},
        {"The same command again finds the run finished and runs nothing:",
         "$ wizq run installer/workflow.jsonc --dir install\n"}}},
      {"run",
       "Runs WORKFLOW on the install directory DIR. The same command again "
       "resumes the run after a crash or Ctrl+C, or joins it as one more "
       "worker while another wizq run works on it; another workflow or input "
       "starts a new run and sets the old one aside under "
       "DIR/.wizard/archive/.\n\n"
       "A Command step's task runs its script with sh -c in the workflow "
       "file's directory, gets {\"kind\", \"value\"} on stdin and prints the "
       "next tasks as a JSON array on stdout. On a terminal the progress is "
       "one line, and a Prompt step asks; with --json, one event per line "
       "goes to stdout.",
       {{"Copy the installer example and run it into ./install, 4 tasks at "
         "a time:",
         kInstaller +
             "$ wizq run installer/workflow.jsonc --dir install --jobs 4\n"},
        {"Kill a slower run halfway, then resume it: the same command.",
         "$ wizq run installer/workflow.jsonc --dir slow --input "
         "'{\"delay\": 1}' &\n"
         "$ sleep 1; kill -9 $!\n"
         "$ wizq run installer/workflow.jsonc --dir slow --input "
         "'{\"delay\": 1}'\n"},
        {"Answer the example's question ahead (no: nothing is installed), "
         "with JSON events on stdout:",
         "$ wizq run installer/workflow.jsonc --dir none "
         "--answer ConfirmInstall=no --json > events.ndjson\n"},
        {"Start over, reusing the results of the previous run except for "
         "the Verify tasks and what they spawn, which run again:",
         "$ wizq run installer/workflow.jsonc --dir install --fresh "
         "--from Verify\n"},
        {"Run the Pool steps of the review example with its scripted "
         "agent:",
         kReview + "$ wizq run review/workflow.jsonc --dir rev --agent "
                   "\"$PWD/review/agent.sh\"\n"}}},
      {"answer",
       "Records answers for the human gates (Prompt steps) of the run in DIR "
       "that wait for one, without running anything. TASK is the id of a "
       "waiting task or the name of its step; VALUE is JSON when it parses, "
       "else text (a confirm gate also takes yes and no). Every answer is "
       "checked first, then all are written in one batch, or none. A wizq "
       "run working on the directory picks them up at its next commit.",
       {{"A gate without a default pauses a run off a terminal (exit 4). "
         "Answer it, then resume the run:",
         "$ cat > gate.json <<'EOF'\n"
         "{\"entrypoint\": \"Ask\", \"steps\": [{\"name\": \"Ask\", "
         "\"next\": [],\n"
         "  \"action\": {\"kind\": \"Prompt\", \"mode\": \"confirm\", "
         "\"message\": \"Go on?\"}}]}\n"
         "EOF\n"
         "$ wizq run gate.json --dir gated || [ $? -eq 4 ]\n"
         "$ wizq answer --dir gated Ask=yes\n"
         "$ wizq run gate.json --dir gated\n"}}},
      {"status",
       "Reads the run in DIR without taking part in it (no worker joins, "
       "nothing is written) and prints its status and counts, its live "
       "workers, the tasks waiting for an answer and the task tree. A run "
       "with no live worker left is shown interrupted, with the command "
       "that resumes it.",
       {{"Run the installer example, then show its task tree:",
         kInstalled + "$ wizq status --dir install\n"},
        {"Only the Download tasks that are done; everything as JSON; the "
         "runs set aside by --fresh:",
         "$ wizq status --dir install --state done --step Download\n"
         "$ wizq status --dir install --json > status.json\n"
         "$ wizq status --dir install --archived\n"}}},
      {"log",
       "Prints the audit log of the run in DIR (DIR/.wizard/audit.jsonl), "
       "one line per event, or one row per attempt with --table.",
       {{"Run the installer example, then show task 1's events and every "
         "attempt:",
         kInstalled + "$ wizq log --dir install --task 1\n"
                      "$ wizq log --dir install --table\n"
                      "$ wizq log --dir install --json > audit.ndjson\n"}}},
      {"report",
       "Writes one self-contained HTML page about the run in DIR (or an "
       "archived run): its task tree and a timeline of every attempt, with "
       "the crashes, resumes and retries.",
       {{"Run the installer example, then write its report:",
         kInstalled + "$ wizq report --dir install -o report.html\n"}}},
      {"prune",
       "Removes the stdout and stderr files of the finished tasks of the run "
       "in DIR (DIR/.wizard/tasks/); the files of failed tasks are kept.",
       {{"Run the installer example, see what would go, then remove it:",
         kInstalled + "$ wizq prune --dir install --dry-run\n"
                      "$ wizq prune --dir install\n"}}},
      {"validate",
       "Checks WORKFLOW as wizq run would before running it and prints every "
       "finding, one per line, with its JSON path (exit 2), or nothing "
       "(exit 0). Warnings name scripts that do not exist or are not "
       "executable.",
       {{"Check the installer example, then write its step graph for "
         "Graphviz:",
         kInstaller +
             "$ wizq validate installer/workflow.jsonc\n"
             "$ wizq validate installer/workflow.jsonc --graph --format dot "
             "> steps.dot\n"}}},
      {"export",
       "Writes the run in DIR as a Barnum state log (NDJSON), which Barnum "
       "or wizq run --resume-from can continue.",
       {{"Run the installer example, then export it:",
         kInstalled +
             "$ wizq export --dir install --format barnum -o state.ndjson\n"}}},
      {"agent",
       "The agent protocol of Pool steps. An agent takes a ready task (its "
       "payload on stdout, under a lease), renews the lease while it works "
       "(heartbeat), then reports done with its response, or fail. Each "
       "call opens the run in DIR, does one transaction and exits; wizq "
       "agent serve runs a command for each task.",
       {{"Start the review example's run and let one agent do its Pool "
         "tasks:",
         kReviewRun + kServeTheRest}}},
      {"agent take",
       "Claims the ready Pool task of lowest id (of the --step steps) under a "
       "lease and prints its payload: the task, its instructions, its id, "
       "the lease token and how long the lease lasts. Exit 5 when nothing "
       "is ready after --wait seconds, or the run has finished.",
       {{"Start the review example's run, take a task (trying again until "
         "the run has one ready), and do it with the example's agent:",
         kReviewTaken +
             "$ printf '%s' \"$payload\" | review/agent.sh > response.json\n"
             "$ wizq agent done --dir rev --task \"$id\" --lease \"$lease\" "
             "--response-file response.json\n"},
        {kServeTheRestWhat, kServeTheRest}}},
      {"agent heartbeat",
       "Renews the lease of a task taken with wizq agent take: it lasts its "
       "lease_seconds from now. An agent heartbeats at least every third of "
       "the lease; a lease that lapses puts the task back (exit 3, lease "
       "lost).",
       {{"Take a task of the review example's run, renew its lease, then "
         "report it done:",
         kReviewTaken +
             "$ wizq agent heartbeat --dir rev --task \"$id\" --lease "
             "\"$lease\"\n"
             "$ printf '%s' \"$payload\" | review/agent.sh |\n"
             "  wizq agent done --dir rev --task \"$id\" --lease \"$lease\"\n"},
        {kServeTheRestWhat, kServeTheRest}}},
      {"agent done",
       "Completes a taken task with its response, a JSON array of next "
       "tasks (--response, --response-file, or stdin), validated exactly as "
       "a Command's stdout. An invalid response fails the attempt (exit 1); "
       "the step's retry options decide what follows.",
       {{"Take a task of the review example's run and report it done with "
         "the example agent's response:",
         kReviewTaken +
             "$ printf '%s' \"$payload\" | review/agent.sh |\n"
             "  wizq agent done --dir rev --task \"$id\" --lease \"$lease\"\n"},
        {kServeTheRestWhat, kServeTheRest}}},
      {"agent fail",
       "Fails the attempt of a taken task (reason agent_failed, with "
       "--message); the task is tried again while the step's max_retries "
       "allow.",
       {{"Take a task of the review example's run and give it up; it goes "
         "back to be taken again:",
         kReviewTaken + "$ wizq agent fail --dir rev --task \"$id\" --lease "
                        "\"$lease\" --message 'cannot review this file'\n"},
        {kServeTheRestWhat, kServeTheRest}}},
      {"agent release",
       "Gives a taken task back without charging it: the task is pending "
       "again and its attempt is refunded, so an agent that cannot do a "
       "task now (it is shutting down, or the task is not for it) does not "
       "use up the step's max_retries.",
       {{"Take a task of the review example's run and give it back; another "
         "agent takes it:",
         kReviewTaken + "$ wizq agent release --dir rev --task \"$id\" "
                        "--lease \"$lease\"\n"},
        {kServeTheRestWhat, kServeTheRest}}},
      {"agent serve",
       "Takes the Pool tasks of the run in DIR (at most --jobs at once) and "
       "runs COMMAND for each, without a shell, with the payload on stdin, "
       "the task's variables in its environment (see ENVIRONMENT) and its "
       "lease renewed while it runs; its stdout is the response. Runs until "
       "the run finishes: exit 0 if it completed, 1 if it failed. A serve "
       "started before its run waits for the run to appear.",
       {{"Start the review example's run and serve its Pool tasks, two at a "
         "time:",
         kReviewRun + "$ wizq agent serve --dir rev --jobs 2 -- "
                      "\"$PWD/review/agent.sh\"\n"
                      "$ wait $!\n"}}},
      {"crashtest",
       "Runs WORKFLOW once undisturbed in a copy of the template directory, "
       "then again and again, killing wizq and the running task trees at "
       "each durable step in turn (--power-cut, the default) or wizq alone "
       "(--orchestrator-only), resuming each run and comparing every final "
       "install directory with the undisturbed one (.wizard/ excluded). It "
       "reports, per kill point, the tasks that ran more than once and the "
       "files that differ: the task bodies that are not safe to run again. "
       "Exit 0 when every end state matches.",
       {{"Kill the installer example at 2 of its durable steps and check "
         "that every resumed run ends as the undisturbed one:",
         kInstaller +
             "$ wizq crashtest installer/workflow.jsonc --kills 2\n"}}},
      {"mcp",
       "Serves the agent protocol of Pool steps as a Model Context Protocol "
       "server on stdin and stdout (JSON-RPC 2.0, one message per line): the "
       "tools take_task, heartbeat, submit_response, fail_task and "
       "run_status do what wizq agent and wizq status --json do. Meant to be "
       "started by an MCP client; stdout carries only the protocol.",
       {{"Initialize a session and list the tools:",
         "$ printf '%s\\n' '{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": "
         "\"initialize\",\n"
         "  \"params\": {\"protocolVersion\": \"2025-06-18\", "
         "\"capabilities\": {},\n"
         "  \"clientInfo\": {\"name\": \"sh\", \"version\": \"1\"}}}' \\\n"
         "  '{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"tools/list\"}' "
         "|\n"
         "  wizq mcp --dir . > replies.ndjson\n"}}},
      {"runs",
       "Lists the runs of a store, one line each: run id, status, task "
       "counts, live workers and start time; --archived adds the archived "
       "runs, --json prints them as an array. On PostgreSQL (--store or "
       "WIZQ_STORE, SPEC 14) every run of the schema; on the directory "
       "store, the run in DIR and its archive.",
       {{"Run the installer example, then list its runs:",
         kInstalled + "$ wizq runs --dir install --archived\n"}}},
      {"db",
       "Creates and upgrades the tables of the PostgreSQL store (SPEC 14) in "
       "their schema (wizq unless --schema says otherwise), in a database "
       "that may hold other tables. Every command that opens a run on "
       "PostgreSQL refuses a schema older than this wizq (naming wizq db "
       "migrate) or newer (left untouched). The location comes from --store "
       "or WIZQ_STORE and is printed with its password removed; give the "
       "password the libpq way (PGPASSFILE, a service file, PGPASSWORD), "
       "not in the location, which ps shows.",
       {{"Create the schema, then check it (the examples run only where "
         "WIZQ_STORE names a PostgreSQL server):",
         "$ wizq db migrate\n"
         "$ wizq db status\n"}}},
      {"db migrate",
       "Applies the schema migrations this wizq knows and the database "
       "lacks, each in its own transaction, under a lock, so that two "
       "migrators at once are safe; prints what it applied.",
       {{"Migrate the schema wizq_ci of the database named by WIZQ_STORE:",
         "$ wizq db migrate --schema wizq_ci\n"}}},
      {"db status",
       "Prints the schema's version and this wizq's; exit 0 when they "
       "match, 3 when the schema is absent, older (migrate it) or newer "
       "(upgrade wizq).",
       {{"Check the schema before a deployment:",
         "$ wizq db status || echo \"migrate first: wizq db migrate\"\n"}}},
      {"completion",
       "Prints the completion script for SHELL. It completes commands, "
       "options, the values of options that take one of a fixed set, "
       "workflow files, the steps of the workflow on the command line (or of "
       "the run in --dir) after --from and --step, and the tasks waiting for "
       "an answer after wizq answer; on each Tab it asks wizq itself, so it "
       "always matches the installed wizq.\n\n"
       "The Debian package installs the scripts where the shells look: "
       "/usr/share/bash-completion/completions/wizq, "
       "/usr/share/zsh/vendor-completions/_wizq and "
       "/usr/share/fish/vendor_completions.d/wizq.fish. For a wizq built "
       "from source, install them for your user as below (zsh: add ~/.zfunc "
       "to fpath before compinit in ~/.zshrc).",
       {{"Install the scripts in your home directory:",
         "$ mkdir -p ~/.local/share/bash-completion/completions ~/.zfunc "
         "~/.config/fish/completions\n"
         "$ wizq completion bash > "
         "~/.local/share/bash-completion/completions/wizq\n"
         "$ wizq completion zsh > ~/.zfunc/_wizq\n"
         "$ wizq completion fish > ~/.config/fish/completions/wizq.fish\n"}}},
  };
}

}  // namespace

const ManText* FindManText(const std::string& command) {
  static const std::vector<ManText>* texts = new std::vector<ManText>(Texts());
  for (const ManText& t : *texts) {
    if (t.command == command) return &t;
  }
  return nullptr;
}

const std::vector<ManFile>& ManFiles() {
  static const std::vector<ManFile>* files = new std::vector<ManFile>{
      {"DIR/.wizard/",
       "Everything wizq knows about the run on the install directory DIR "
       "(--dir); created mode 0700."},
      {"DIR/.wizard/queue.json",
       "The snapshot: the whole run as of one event of the audit log."},
      {"DIR/.wizard/audit.jsonl",
       "The event log: every transition of the run, in order, one JSON line "
       "each with its CRC; the snapshot plus the events after it are the "
       "state."},
      {"DIR/.wizard/tasks/",
       "Each attempt's stdout and stderr, and the journal of the attempts' "
       "starts and exits."},
      {"DIR/.wizard/workers/",
       "One file per live worker process, locked by it."},
      {"DIR/.wizard/archive/",
       "The runs set aside by --fresh or by another workflow or input."},
      {"DIR/.wizard/lock", "The directory lock."},
      {"/usr/share/doc/wizq/",
       "The documentation (docs/FORMAT.md describes these files) and the "
       "examples."},
  };
  return *files;
}

}  // namespace wizq::docgen
