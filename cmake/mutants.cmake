# Mutant builds for the machines torture (tests/machines/torture, issue
# 24; make torture-mutants): a build with one guard of the PostgreSQL store
# path compiled out, which the torture must then catch. A mutant is chosen
# at configure time only (-DWIZQ_MUTANT=NAME in a build directory of its
# own), never by an environment switch of the shipped binary; it defines
# its macro on the one source file that holds the guard, so switching
# mutants recompiles that file alone.
#
#   WIZQ_MUTANT      file                     the guard it disables
#   fence            queue/pg/pg_txn.cc       the claim fence (RequireHeld)
#   local_deadline   tasks/proc/spawner.cc    the local deadline
#                                             (Spawner::SetDeadline)
#   guarded_rescue   queue/pg/pg_reclaim.cc   a claim waits for its lease
#                                             before another host rescues it
#                                             (PgStore::Reclaim)
#   keepalives       queue/pg/pg_conn.cc      TCP keepalives, the answer
#                                             timeout (PgConn::Await) and
#                                             tcp_user_timeout (Connect)
#   outcome_reread   queue/pg/pg_store.cc     the re-read of a COMMIT of
#                                             unknown outcome
#                                             (PgStore::Commit)
#
# Empty (the default): no mutant. Included from the top-level
# CMakeLists.txt (source file properties are seen by the targets of the
# directory that sets them: the library `wizq` is made there).

set(WIZQ_MUTANT "" CACHE STRING
    "Compile one guard out for the machines torture (never ship it): fence, local_deadline, guarded_rescue, keepalives or outcome_reread; empty: none")
set_property(CACHE WIZQ_MUTANT PROPERTY STRINGS
             "" fence local_deadline guarded_rescue keepalives outcome_reread)

if(NOT WIZQ_MUTANT STREQUAL "")
  if(WIZQ_MUTANT STREQUAL "fence")
    set(_wizq_mutant_file queue/pg/pg_txn.cc)
    set(_wizq_mutant_macro WIZQ_MUTANT_NO_FENCE)
  elseif(WIZQ_MUTANT STREQUAL "local_deadline")
    set(_wizq_mutant_file tasks/proc/spawner.cc)
    set(_wizq_mutant_macro WIZQ_MUTANT_NO_LOCAL_DEADLINE)
  elseif(WIZQ_MUTANT STREQUAL "guarded_rescue")
    set(_wizq_mutant_file queue/pg/pg_reclaim.cc)
    set(_wizq_mutant_macro WIZQ_MUTANT_NO_GUARDED_RESCUE)
  elseif(WIZQ_MUTANT STREQUAL "keepalives")
    set(_wizq_mutant_file queue/pg/pg_conn.cc)
    set(_wizq_mutant_macro WIZQ_MUTANT_NO_KEEPALIVES)
  elseif(WIZQ_MUTANT STREQUAL "outcome_reread")
    set(_wizq_mutant_file queue/pg/pg_store.cc)
    set(_wizq_mutant_macro WIZQ_MUTANT_NO_OUTCOME_REREAD)
  else()
    message(FATAL_ERROR
      "WIZQ_MUTANT=\"${WIZQ_MUTANT}\" is not a mutant: expected fence, "
      "local_deadline, guarded_rescue, keepalives or outcome_reread (or "
      "empty for none)")
  endif()
  # APPEND: kept beside any definitions the file already has.
  set_property(SOURCE ${_wizq_mutant_file} APPEND PROPERTY
               COMPILE_DEFINITIONS ${_wizq_mutant_macro}=1)
  message(WARNING
    "mutant build: ${_wizq_mutant_macro} on ${_wizq_mutant_file}; "
    "for the machines torture only, never to be installed or shipped")
  unset(_wizq_mutant_file)
  unset(_wizq_mutant_macro)
endif()
