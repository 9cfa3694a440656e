# machine_probe.sh: the MACHINE line of the shell benchmarks, sourced by
# process_bench.sh, reuse_bench.sh, agent_bench.sh and ab_bench.sh after
# they set BENCH_DIR (this folder) and, where they have one, WIZQ:
#
#   machine_line DIR   prints `MACHINE fdatasync_us=<median> load=<1-min
#                      loadavg> cores=<nproc>`, measured in DIR
#
# The line and its fields are explained in bench/machine.h; the C++
# benchmarks print the same line with the same code. The probe is the
# machine_probe binary (bench/machine_probe.cc, built with the benchmarks),
# taken from $MACHINE_PROBE, else next to $WIZQ, else build/ of this
# checkout; sourcing fails (exit 2) when none of them exists.
MACHINE_PROBE_BIN=
for candidate in "${MACHINE_PROBE:-}" "${WIZQ:+$(dirname "$WIZQ")/machine_probe}" \
                 "$BENCH_DIR/../build/machine_probe"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then
    MACHINE_PROBE_BIN=$candidate
    break
  fi
done
if [ -z "$MACHINE_PROBE_BIN" ]; then
  echo "$(basename "$0"): machine_probe not found next to ${WIZQ:-the binary} or in build/;" \
       "build it (cmake --build build --target machine_probe) or set MACHINE_PROBE" >&2
  exit 2
fi

machine_line() { "$MACHINE_PROBE_BIN" "$1"; }
