# Sourced by the benchmark runners. run_rotated REPS STEP...: runs every STEP (a shell function
# taking the repetition number) REPS times, starting each repetition one step later, so no
# implementation always runs first or last (this VM's speed drifts within a run).
run_rotated() {
  local reps=$1 rep i n step
  shift
  local steps=("$@")
  n=${#steps[@]}
  for rep in $(seq 1 "$reps"); do
    echo "== repetition $rep/$reps"
    for i in $(seq 0 $((n - 1))); do
      step=${steps[$(( (i + rep - 1) % n ))]}
      echo "   $step"
      "$step" "$rep"
    done
  done
}
