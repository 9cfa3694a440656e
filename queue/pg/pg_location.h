// Where a PostgreSQL store is, and what of it must never be shown (SPEC
// §14). A location is a `postgresql://` or `postgres://` URL or a libpq
// keyword string ("host=db user=wizq dbname=runs"). A password may be
// written in it (the URL's user info, a `password=` query parameter or
// keyword; `sslpassword` likewise), but it belongs in a password file
// (PGPASSFILE, ~/.pgpass), a service file (PGSERVICEFILE) or PGPASSWORD:
// a command line is visible to every user of the machine in `ps`.
//
// Redaction errs on the side of hiding: when a location is malformed, more
// than the password may be hidden, never less.
#ifndef WIZQ_QUEUE_PG_PG_LOCATION_H_
#define WIZQ_QUEUE_PG_PG_LOCATION_H_

#include <string>
#include <string_view>
#include <vector>

namespace wizq {

// What a removed secret is shown as.
inline constexpr std::string_view kPgRedacted = "***";

// `location` with the value of every password (and sslpassword) replaced by
// kPgRedacted: "postgresql://alice:***@db/runs",
// "host=db password=*** dbname=runs". What every message and output shows.
std::string RedactPgLocation(std::string_view location);

// `location` without its passwords (and sslpasswords), for a command
// printed to be run again: "postgresql://alice@db/runs", "host=db
// dbname=runs". Run, it finds the password where it belongs (a password
// file, PGPASSWORD); with kPgRedacted in its place it would send that. A
// location libpq cannot read is redacted (it would not run anyway).
std::string PgLocationWithoutPassword(std::string_view location);

// Whether a password (or sslpassword) is written in `location`, as libpq
// reads it; a location libpq cannot parse counts when it looks like it
// holds one.
bool PgLocationHasPassword(std::string_view location);

// The warning printed when a password is written in a location given on
// the command line (`option` names it, e.g. "--store"), naming the safer
// ways.
std::string PgPasswordWarning(std::string_view option);

// The strings that must not appear in a message about `location`: each
// password written in it, as written and percent-decoded, and PGPASSWORD's
// value. libpq's own messages may quote parts of a connection string (a
// malformed percent-escape, a host name).
std::vector<std::string> PgLocationSecrets(std::string_view location);

// `text` with every occurrence of each of `secrets` replaced by kPgRedacted.
std::string ScrubPgSecrets(std::string text,
                           const std::vector<std::string>& secrets);

// The environment variables removed from the environment of task bodies
// and agents (SPEC §14): those whose value can hold a credential of the
// store. WIZQ_STORE (a location, possibly with its password) and
// PGPASSWORD (a password). Kept, on purpose: PGPASSFILE, PGSERVICEFILE,
// PGSSLKEY and the other PG* variables name files, hosts or modes, not
// secrets (a process of the same user can read those files anyway), and a
// task that uses PostgreSQL itself relies on them.
inline constexpr const char* kPgScrubbedEnv[] = {"WIZQ_STORE", "PGPASSWORD"};

}  // namespace wizq

#endif  // WIZQ_QUEUE_PG_PG_LOCATION_H_
